package records_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/payintake/payintake/pgserver/pgtest"
	"github.com/payintake/payintake/records"
)

// An unfinished upload is one row a name (whoever starts it, at once); one
// writer at a time holds it (a lease, taken only when free or run out); a
// writer whose upload was replaced or taken stores nothing; a resume adds
// chunks after the stored ones and reads back exactly the bytes stored.
func TestUnfinishedUploads(t *testing.T) {
	st := pgtest.Store(t)
	ctx := t.Context()
	if err := st.AddPartner(ctx, records.Partner{ID: "acme"}); err != nil {
		t.Fatal(err)
	}
	hash := []byte("state")
	const lease = time.Minute

	// Ten servers start the same name at the same moment: one row.
	var wg sync.WaitGroup
	ids := make(chan int64, 10)
	for i := range 10 {
		wg.Go(func() {
			u, err := st.StartUpload(ctx, "acme", "a.csv", "w"+string(rune('0'+i)), lease, hash, 64)
			if err != nil {
				t.Error(err)
				return
			}
			ids <- u.ID
		})
	}
	wg.Wait()
	close(ids)
	var n int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM sftp_uploads WHERE name = 'a.csv'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows of a.csv after 10 concurrent starts: %d (%v), want 1", n, err)
	}

	up, err := st.StartUpload(ctx, "acme", "b.csv", "A", lease, hash, 64)
	if err != nil {
		t.Fatal(err)
	}
	// B cannot take it while A's lease runs.
	if _, err := st.ClaimUpload(ctx, "acme", "b.csv", "B", lease); !errors.Is(err, records.ErrUploadBusy) {
		t.Fatalf("claim of a leased upload: %v, want ErrUploadBusy", err)
	}
	if _, err := st.ClaimUpload(ctx, "acme", "nope.csv", "B", lease); !errors.Is(err, records.ErrNotFound) {
		t.Fatalf("claim of no upload: %v, want ErrNotFound", err)
	}
	// A stores 10,000 bytes at its cut and lets go.
	dir := t.TempDir()
	data := make([]byte, 25000)
	for i := range data {
		data[i] = byte(i * 13)
	}
	spool := filepath.Join(dir, "spool")
	if err := os.WriteFile(spool, data[:10000], 0o600); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveUpload(ctx, records.UploadState{ID: up.ID, Writer: "B", Path: spool, Size: 10000, HashState: hash, Release: true}); !errors.Is(err, records.ErrNotFound) {
		t.Fatalf("save by a writer without the lease: %v, want ErrNotFound", err)
	}
	if err := st.SaveUpload(ctx, records.UploadState{ID: up.ID, Writer: "A", Path: spool, Size: 10000, HashState: []byte("after 10000"), Release: true}); err != nil {
		t.Fatal(err)
	}
	// B resumes: the stored bytes and hash state, and adds the rest.
	got, err := st.ClaimUpload(ctx, "acme", "b.csv", "B", lease)
	if err != nil || got.Size != 10000 || string(got.HashState) != "after 10000" {
		t.Fatalf("claim after the release: %+v %v", got, err)
	}
	if err := os.WriteFile(spool, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveUpload(ctx, records.UploadState{ID: up.ID, Writer: "B", Path: spool, Size: int64(len(data)), HashState: hash}); err != nil {
		t.Fatal(err)
	}
	var back bytes.Buffer
	if err := st.CopyUploadBytes(ctx, up.ID, &back); err != nil || !bytes.Equal(back.Bytes(), data) {
		t.Fatalf("bytes read back: %d of %d, equal %v, %v", back.Len(), len(data), bytes.Equal(back.Bytes(), data), err)
	}
	// Not released (Release false): still B's.
	if _, err := st.ClaimUpload(ctx, "acme", "b.csv", "A", lease); !errors.Is(err, records.ErrUploadBusy) {
		t.Fatalf("claim while B writes: %v, want ErrUploadBusy", err)
	}
	// A lease that ran out (its server died) is taken.
	if err := st.RenewUploads(ctx, "B", -time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClaimUpload(ctx, "acme", "b.csv", "A", lease); err != nil {
		t.Fatalf("claim of an upload whose lease ran out: %v", err)
	}
	// A new upload of the name replaces it: the old writer stores nothing.
	if _, err := st.StartUpload(ctx, "acme", "b.csv", "C", lease, hash, 64); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveUpload(ctx, records.UploadState{ID: up.ID, Writer: "A", Path: spool, Size: int64(len(data)), HashState: hash}); !errors.Is(err, records.ErrNotFound) {
		t.Fatalf("save of a replaced upload: %v, want ErrNotFound", err)
	}
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM sftp_upload_chunks WHERE upload_id = $1`, up.ID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("chunks of the replaced upload: %d (%v)", n, err)
	}
	// The partner's limit.
	if _, err := st.StartUpload(ctx, "acme", "c.csv", "A", lease, hash, 2); !errors.Is(err, records.ErrTooManyUploads) {
		t.Fatalf("a third upload at a limit of 2: %v, want ErrTooManyUploads", err)
	}
	// Expiry leaves uploads being written alone.
	gone, err := st.ExpireUploads(ctx, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(gone) != 0 {
		t.Fatalf("expired %d uploads being written", len(gone))
	}
	if err := st.RenewUploads(ctx, "C", -time.Second); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := st.RenewUploads(ctx, "w"+string(rune('0'+i)), -time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if gone, err = st.ExpireUploads(ctx, time.Now().Add(time.Hour)); err != nil || len(gone) != 2 {
		t.Fatalf("expired %d uploads (%v), want 2", len(gone), err)
	}
}
