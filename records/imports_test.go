package records_test

import (
	"go/build"
	"strings"
	"testing"
)

// TestStoreKnowsNoFileFormat: the store keeps the bytes of files (result
// workbooks, sealed results) without knowing their formats: of this module
// its code imports only normalize (the result lines' layout), migrations
// and internal helpers. A format is built above it (apply gives the
// workbook builder) and handed down as bytes.
func TestStoreKnowsNoFileFormat(t *testing.T) {
	const module = "github.com/payintake/payintake/"
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkg.GoFiles) < 20 {
		t.Fatalf("read %d files of the package; the test looks in the wrong place", len(pkg.GoFiles))
	}
	for _, path := range pkg.Imports { // its code's, not its tests'
		rest, ours := strings.CutPrefix(path, module)
		if ours && rest != "normalize" && rest != "migrations" && !strings.HasPrefix(rest, "internal/") {
			t.Errorf("records imports %s: the store keeps bytes; build the file above it and give the store the bytes (or a builder, as NoteResultFormat takes)", path)
		}
	}
}
