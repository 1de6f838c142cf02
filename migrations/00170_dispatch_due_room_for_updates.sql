-- +goose Up

-- A due line is updated once when its answer is recorded (its key, its
-- state) and grows by its key. An answer's group covers up to 5,000
-- consecutive lines in one transaction, so the old versions of a whole page
-- are still there when its last line is updated: at fillfactor 50 a page
-- ran out of room after about three quarters of its lines, and the rest
-- were non-HOT updates (a new entry in each of the table's three indexes).
-- At 40 every update of a page fits on the page.
ALTER TABLE dispatch_due SET (fillfactor = 40);

-- +goose Down
ALTER TABLE dispatch_due SET (fillfactor = 50);
