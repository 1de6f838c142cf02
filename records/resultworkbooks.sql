-- name: NoteWorkbookResult
-- An xlsx result is served as the workbook stored in result_workbooks; $2 is its size.
UPDATE envelopes SET result_format = 'xlsx', result_size = $2 WHERE id = $1;

-- name: ResultWorkbookChunks
SELECT n, data FROM result_workbooks WHERE envelope_id = $1 ORDER BY n;
