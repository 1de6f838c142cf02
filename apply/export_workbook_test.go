package apply

// WorkbookRows is the most data rows e takes in a file of a partner whose
// results are workbooks.
func WorkbookRows(e *Engine) int { return e.workbookRows }
