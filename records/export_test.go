package records

// Statements returns every named statement of the .sql files, fragments
// expanded, by name, for the tests that check them against the schema.
func Statements() map[string]string { return statements.Statements() }

// ChunkSize is the most bytes one envelope_chunks row holds (the last
// chunk of an envelope holds fewer).
const ChunkSize = chunkSize
