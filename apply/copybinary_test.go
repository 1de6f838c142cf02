package apply_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/payintake/payintake/apply"
	"github.com/payintake/payintake/pgserver/pgtest"
)

// TestBinaryCopyMatchesText copies numbers and dates in the binary format
// a first file's records are written in and checks that PostgreSQL stores
// what it stores when it parses the same values as text (numeric_in,
// date_in: how a staged file's values arrive), scale and all.
func TestBinaryCopyMatchesText(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pgtest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows := [][2]string{
		{"0", "2000-01-01"}, {"0.00", "1999-12-31"}, {"1", "2026-11-30"}, {"-1.5", "2024-02-29"},
		{"12345.6789", "1970-01-01"}, {"100000000.00001", "0001-01-01"}, {"-0.01", "9999-12-31"},
		{"99999999999999999999.123456789", "2300-06-15"}, {"10000", "1700-03-01"}, {"1.10000", "2026-01-31"},
		{"1234.50", ""}, {"", "2026-11-01"}, {"0.0001", "2026-12-01"}, {"123.456", "1900-02-28"},
	}
	stream, err := apply.BinaryNumericDates(rows)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE TEMP TABLE t (i serial, n numeric, d date)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.PgConn().CopyFrom(ctx, bytes.NewReader(stream), `COPY t (n, d) FROM STDIN (FORMAT binary)`); err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		var bin, txt string
		err := conn.QueryRow(ctx, `SELECT concat_ws('|', t.n::text, t.d::text, scale(t.n)),
			concat_ws('|', nullif($2, '')::numeric::text, nullif($3, '')::date::text, scale(nullif($2, '')::numeric))
			FROM t WHERE i = $1`, i+1, r[0], r[1]).Scan(&bin, &txt)
		if err != nil {
			t.Fatal(err)
		}
		if bin != txt {
			t.Errorf("%q %q: binary stored %s, text %s", r[0], r[1], bin, txt)
		}
	}
	for _, bad := range [][2]string{{"1e5", "2026-11-30"}, {"1.2.3", "2026-11-30"}, {"1", "2026-02-30"}, {"1", "30/11/2026"}, {".5", "2026-11-30"}} {
		if _, err := apply.BinaryNumericDates([][2]string{bad}); err == nil {
			t.Errorf("%q %q encoded; want a value that is not canonical refused (the file is then staged)", bad[0], bad[1])
		}
	}
}
