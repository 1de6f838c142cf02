package records

import (
	"io/fs"
	"strings"
)

// Statements returns every named statement of the .sql files, fragments
// expanded, by name, for the tests that check them against the schema.
func Statements() map[string]string {
	out := map[string]string{}
	for k, v := range statements {
		if name, ok := strings.CutPrefix(k, "name "); ok {
			out[name] = v
		}
	}
	return out
}

// LoadStatements is loadStatements, for the loader's own tests.
func LoadStatements(fsys fs.FS, fragments map[string]string) (map[string]string, error) {
	return loadStatements(fsys, fragments)
}

// ChunkSize is the most bytes one envelope_chunks row holds (the last
// chunk of an envelope holds fewer).
const ChunkSize = chunkSize
