package apply

// The temporary tables a file's rows are staged and classified in
// (temptables.sql), created in the processing transaction and dropped at
// its commit: the engine's working space, not the store's tables.
var (
	stageDDL      = query("CreateStage")
	classifiedDDL = query("CreateClassified")
	empRefsDDL    = query("CreateEmpRefs")
	empDDL        = query("CreateEmp")
)
