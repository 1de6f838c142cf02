package records

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Statements of inbox.sql.
var (
	sqlInboxFiles      = query("InboxFiles")
	sqlInboxFile       = query("InboxFile")
	sqlSetInboxModTime = query("SetInboxModTime")
)

// InboxFile is a file a partner sent over SFTP, as its /inbox shows it: the
// latest envelope of that exact name.
type InboxFile struct {
	Name       string
	Size       int64
	ReceivedAt time.Time
	// ModTime is the time the client set on the file (setstat), else ReceivedAt.
	ModTime time.Time
}

const inboxColumns = `file_name, size, received_at,
	coalesce((SELECT client_mtime FROM envelope_client_times t WHERE t.envelope_id = id), received_at)`

func scanInbox(rows pgx.Rows) ([]InboxFile, error) {
	defer rows.Close()
	var out []InboxFile
	for rows.Next() {
		var f InboxFile
		if err := rows.Scan(&f.Name, &f.Size, &f.ReceivedAt, &f.ModTime); err != nil {
			return nil, fmt.Errorf("read inbox file: %w", err)
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list inbox files: %w", err)
	}
	return out, nil
}

// InboxFiles lists the files the partner sent over SFTP since the given time
// (the latest envelope of each name, cut-off uploads left out), by name, at
// most limit of them.
func (s *Store) InboxFiles(ctx context.Context, partner string, since time.Time, limit int) ([]InboxFile, error) {
	rows, err := s.pool.Query(ctx, sqlInboxFiles, partner, since, limit)
	if err != nil {
		return nil, fmt.Errorf("list inbox files of %s: %w", partner, err)
	}
	return scanInbox(rows)
}

// InboxFile is the partner's latest SFTP upload named name received since
// the given time, or ErrNotFound.
func (s *Store) InboxFile(ctx context.Context, partner, name string, since time.Time) (InboxFile, error) {
	rows, err := s.pool.Query(ctx, sqlInboxFile, partner, name, since)
	if err != nil {
		return InboxFile{}, fmt.Errorf("look up inbox file %q: %w", name, err)
	}
	fs, err := scanInbox(rows)
	if err != nil {
		return InboxFile{}, err
	}
	if len(fs) == 0 {
		return InboxFile{}, fmt.Errorf("inbox file %q: %w", name, ErrNotFound)
	}
	return fs[0], nil
}

// SetInboxModTime records the modification time a client set on its latest
// SFTP upload named name received since the given time; ErrNotFound if
// there is none.
func (s *Store) SetInboxModTime(ctx context.Context, partner, name string, since, mtime time.Time) error {
	// Not an UPDATE of the envelope: its row lock is processing's lease.
	tag, err := s.pool.Exec(ctx, sqlSetInboxModTime, partner, name, since, mtime)
	if err != nil {
		return fmt.Errorf("set time of inbox file %q: %w", name, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("inbox file %q: %w", name, ErrNotFound)
	}
	return nil
}
