package notify

// Statements returns every named statement of notify/*.sql, for the test
// that prepares them against the schema.
func Statements() map[string]string { return statements.Statements() }
