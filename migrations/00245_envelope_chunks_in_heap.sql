-- +goose Up
-- An envelope's bytes are written in chunks of 7,400 bytes from now on
-- (records/envelopebytes.go), each kept in the table's own pages: STORAGE
-- MAIN compresses a chunk in its row (lz4, as before) when that makes it
-- smaller and never moves it out of line. So a chunk is one heap tuple and
-- one primary-key entry, where a 1 MiB chunk was TOASTed into ~500 pieces of
-- ~2 KB, each a tuple with an index entry of its own: about half the
-- database's CPU a byte (BENCHMARKS.md, SFTP upload speed). A payroll CSV
-- chunk compresses to less than half a page (two rows a page: the same
-- space as before); incompressible bytes take a page a chunk. Chunks stored
-- before (1 MiB, TOASTed) stay as they are and read the same.
ALTER TABLE envelope_chunks ALTER COLUMN data SET STORAGE MAIN;

-- +goose Down
ALTER TABLE envelope_chunks ALTER COLUMN data SET STORAGE EXTENDED;
