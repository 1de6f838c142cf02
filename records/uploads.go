package records

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

// Unfinished uploads (SFTP files not received yet) are stored here, so that
// any server on the database lists them and resumes them: an upload row per
// partner and name, its bytes in sftp_upload_chunks. A
// server keeps the bytes of a handle open on it in its own spool and stores
// them (SaveUpload) every so often while the handle writes, and when it
// ends without the file being received (cut off, refused, or temp-named
// waiting for a rename); a resume on any server starts from what was
// stored.

// Statements of uploads.sql.
var (
	sqlLockUploadName   = query("LockUploadName")
	sqlDropUploadNamed  = query("DropUploadNamed")
	sqlCountUploads     = query("CountUploads")
	sqlInsertUpload     = query("InsertUpload")
	sqlClaimUpload      = query("ClaimUpload")
	sqlUploadNamed      = query("UploadNamed")
	sqlUploads          = query("Uploads")
	sqlLockOwnUpload    = query("LockOwnUpload")
	sqlSaveUpload       = query("SaveUpload")
	sqlReleaseUpload    = query("ReleaseUpload")
	sqlRenewUploads     = query("RenewUploads")
	sqlUploadChunks     = query("UploadChunks")
	sqlLockUploadNamed  = query("LockUploadNamed")
	sqlRenameUpload     = query("RenameUpload")
	sqlDropUpload       = query("DropUpload")
	sqlDiscardUpload    = query("DiscardUpload")
	sqlSetUploadModTime = query("SetUploadModTime")
	sqlExpireUploads    = query("ExpireUploads")
	uploadChunksTable   = pgx.Identifier{"sftp_upload_chunks"}
	uploadChunksColumns = []string{"upload_id", "n", "data"}
)

// ErrUploadBusy means another server (or handle) writes the upload now: its
// lease has not expired.
var ErrUploadBusy = errors.New("the upload is being written by another session")

// ErrTooManyUploads means the partner has as many unfinished uploads as
// allowed.
var ErrTooManyUploads = errors.New("too many unfinished uploads")

// Upload is an unfinished upload as stored.
type Upload struct {
	ID      int64
	Partner string
	Name    string
	// Size is how many bytes are stored, contiguous from 0; HashState is
	// the SHA-256 state after them (crypto/sha256's marshalled digest).
	Size      int64
	HashState []byte
	ModTime   time.Time // set by the client; zero if never
	Started   time.Time
	Touched   time.Time
}

const uploadColumns = `id, partner_id, name, size, sha256_state, client_mtime, started, touched`

func scanUpload(row pgx.Row) (Upload, error) {
	var u Upload
	var mtime *time.Time
	err := row.Scan(&u.ID, &u.Partner, &u.Name, &u.Size, &u.HashState, &mtime, &u.Started, &u.Touched)
	if errors.Is(err, pgx.ErrNoRows) {
		return u, fmt.Errorf("unfinished upload: %w", ErrNotFound)
	}
	if err != nil {
		return u, fmt.Errorf("read unfinished upload: %w", err)
	}
	if mtime != nil {
		u.ModTime = *mtime
	}
	return u, nil
}

// StartUpload records a new, empty unfinished upload of name written by
// writer (leased for lease), hash being the state of an empty SHA-256. It
// replaces the partner's unfinished upload of that name, whoever writes it
// (that handle goes on, on its own: received at its clean close, dropped at
// its cut). ErrTooManyUploads when the partner already has max others.
func (s *Store) StartUpload(ctx context.Context, partner, name, writer string, lease time.Duration, hash []byte, max int) (Upload, error) {
	// Starts of one name wait for each other (an advisory lock), so the
	// later replaces the earlier as if they came one after the other;
	// without it, 50 at once mostly failed on the unique constraint, or
	// retried round after round. The constraint still decides: a row that
	// appears all the same (a rename to the name) is replaced at a retry.
	for range 10 {
		u, err := s.startUpload(ctx, partner, name, writer, lease, hash, max)
		if !errors.Is(err, ErrNotFound) {
			return u, err
		}
	}
	return Upload{}, fmt.Errorf("record new upload %q: started elsewhere again and again", name)
}

func (s *Store) startUpload(ctx context.Context, partner, name, writer string, lease time.Duration, hash []byte, max int) (Upload, error) {
	var u Upload
	err := s.inTxWithin(ctx, "record new upload", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlLockUploadName, partner, name); err != nil {
			return fmt.Errorf("lock upload name: %w", err)
		}
		if _, err := tx.Exec(ctx, sqlDropUploadNamed, partner, name); err != nil {
			return fmt.Errorf("replace unfinished upload: %w", err)
		}
		var n int
		if err := tx.QueryRow(ctx, sqlCountUploads, partner).Scan(&n); err != nil {
			return fmt.Errorf("count unfinished uploads: %w", err)
		}
		if n >= max {
			return ErrTooManyUploads
		}
		var err error
		u, err = scanUpload(tx.QueryRow(ctx, sqlInsertUpload, partner, name, hash, writer, lease.Milliseconds()))
		return err
	})
	return u, err
}

// ClaimUpload makes writer the writer of the partner's unfinished upload
// name for lease: ErrNotFound if there is none, ErrUploadBusy while another
// writer's lease runs.
func (s *Store) ClaimUpload(ctx context.Context, partner, name, writer string, lease time.Duration) (Upload, error) {
	var u Upload
	err := s.inTxWithin(ctx, "take up unfinished upload", func(tx pgx.Tx) error {
		var err error
		u, err = scanUpload(tx.QueryRow(ctx, sqlClaimUpload, partner, name, writer, lease.Milliseconds()))
		return err
	})
	if !errors.Is(err, ErrNotFound) {
		return u, err
	}
	if _, err := s.UploadNamed(ctx, partner, name); err != nil {
		return u, err
	}
	return u, ErrUploadBusy
}

// UploadNamed is the partner's unfinished upload called name, or ErrNotFound.
func (s *Store) UploadNamed(ctx context.Context, partner, name string) (Upload, error) {
	return scanUpload(s.pool.QueryRow(ctx, sqlUploadNamed, partner, name))
}

// Uploads lists the partner's unfinished uploads, by name, at most limit.
func (s *Store) Uploads(ctx context.Context, partner string, limit int) ([]Upload, error) {
	rows, err := s.pool.Query(ctx, sqlUploads, partner, limit)
	return scanUploads(rows, err, "list unfinished uploads")
}

// scanUploads reads the rows of a query of upload_columns (err: the
// query's).
func scanUploads(rows pgx.Rows, err error, what string) ([]Upload, error) {
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var out []Upload
	for rows.Next() {
		u, err := scanUpload(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// UploadState is what a writer stores of its upload.
type UploadState struct {
	ID     int64
	Writer string
	// Path is the writer's spool: it holds the upload's bytes [0, Size),
	// of which those past the stored size are added.
	Path      string
	Size      int64
	HashState []byte
	ModTime   time.Time
	// Release ends the writer's lease.
	Release bool
}

// SaveUpload stores the bytes of st.Path past those already stored, with the
// size and hash state they end at, in one transaction. ErrNotFound: the
// upload is no longer st.Writer's (replaced, discarded, or its lease expired
// and another writer took it); nothing is stored.
func (s *Store) SaveUpload(ctx context.Context, st UploadState) error {
	return s.inTxWithin(ctx, "save unfinished upload", func(tx pgx.Tx) error {
		var stored int64
		var next int32
		err := tx.QueryRow(ctx, sqlLockOwnUpload, st.ID, st.Writer).Scan(&stored, &next)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("unfinished upload %d: %w", st.ID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("lock unfinished upload: %w", err)
		}
		if st.Size < stored {
			return fmt.Errorf("unfinished upload %d: %d bytes are stored, the spool holds %d", st.ID, stored, st.Size)
		}
		if st.Size > stored {
			f, err := os.Open(st.Path)
			if err != nil {
				return fmt.Errorf("open upload spool: %w", err)
			}
			defer f.Close()
			r := io.NewSectionReader(f, stored, st.Size-stored)
			if err := copyChunks(ctx, tx, uploadChunksTable, uploadChunksColumns, st.ID, next, r, st.Size-stored); err != nil {
				return err
			}
		}
		var mtime *time.Time
		if !st.ModTime.IsZero() {
			mtime = &st.ModTime
		}
		if _, err := tx.Exec(ctx, sqlSaveUpload, st.ID, st.Size, st.HashState, mtime, st.Release); err != nil {
			return fmt.Errorf("save unfinished upload: %w", err)
		}
		return nil
	})
}

// ReleaseUpload ends writer's lease on the upload (its bytes unchanged).
func (s *Store) ReleaseUpload(ctx context.Context, id int64, writer string) error {
	_, err := s.execWithin(ctx, "release unfinished upload", sqlReleaseUpload, id, writer)
	return err
}

// RenewUploads extends the leases of every upload writer writes.
func (s *Store) RenewUploads(ctx context.Context, writer string, lease time.Duration) error {
	_, err := s.execWithin(ctx, "renew unfinished uploads' leases", sqlRenewUploads, writer, lease.Milliseconds())
	return err
}

// CopyUploadBytes writes the stored bytes of the upload to w.
func (s *Store) CopyUploadBytes(ctx context.Context, id int64, w io.Writer) error {
	return copyChunkRows(ctx, s.pool, sqlUploadChunks, "unfinished upload", id, w)
}

// RenameUpload renames the partner's unfinished upload from to to, replacing
// the one called to; a writer other than "" takes the upload (for lease) to
// receive it. ErrNotFound: no upload called from; ErrUploadBusy: another
// writer writes it.
func (s *Store) RenameUpload(ctx context.Context, partner, from, to, writer string, lease time.Duration) (Upload, error) {
	var u Upload
	err := s.inTxWithin(ctx, "rename unfinished upload", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlLockUploadName, partner, to); err != nil {
			return fmt.Errorf("lock upload name: %w", err)
		}
		id, err := lockIdleUpload(ctx, tx, partner, from, writer)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sqlDropUploadNamed, partner, to); err != nil {
			return fmt.Errorf("replace unfinished upload: %w", err)
		}
		u, err = scanUpload(tx.QueryRow(ctx, sqlRenameUpload, id, to, writer, lease.Milliseconds()))
		return err
	})
	return u, err
}

// lockIdleUpload locks the partner's unfinished upload called name for tx,
// and returns its id: ErrNotFound, or ErrUploadBusy while a writer other
// than writer holds its lease.
func lockIdleUpload(ctx context.Context, tx pgx.Tx, partner, name, writer string) (int64, error) {
	var id int64
	var busy bool
	err := tx.QueryRow(ctx, sqlLockUploadNamed, partner, name, writer).Scan(&id, &busy)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("unfinished upload: %w", ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("lock unfinished upload: %w", err)
	}
	if busy {
		return 0, ErrUploadBusy
	}
	return id, nil
}

// DiscardUpload drops the partner's unfinished upload called name unless
// another writer than writer writes it (ErrUploadBusy). ErrNotFound: none.
func (s *Store) DiscardUpload(ctx context.Context, partner, name, writer string) (Upload, error) {
	var u Upload
	err := s.inTxWithin(ctx, "discard unfinished upload", func(tx pgx.Tx) error {
		id, err := lockIdleUpload(ctx, tx, partner, name, writer)
		if err != nil {
			return err
		}
		u, err = scanUpload(tx.QueryRow(ctx, sqlDiscardUpload, id))
		return err
	})
	return u, err
}

// DropUpload drops the unfinished upload id (whoever writes it).
func (s *Store) DropUpload(ctx context.Context, id int64) error {
	_, err := s.execWithin(ctx, "drop unfinished upload", sqlDropUpload, id)
	return err
}

// SetUploadModTime sets the time the client gave the partner's unfinished
// upload called name, or ErrNotFound.
func (s *Store) SetUploadModTime(ctx context.Context, partner, name string, mtime time.Time) error {
	tag, err := s.execWithin(ctx, "set time of unfinished upload", sqlSetUploadModTime, partner, name, mtime)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("unfinished upload: %w", ErrNotFound)
	}
	return nil
}

// ExpireUploads drops the unfinished uploads not written to since before
// (and not being written) and returns them.
func (s *Store) ExpireUploads(ctx context.Context, before time.Time) ([]Upload, error) {
	rows, err := s.pool.Query(ctx, sqlExpireUploads, before)
	return scanUploads(rows, err, "expire unfinished uploads")
}
