package workbook

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"unsafe"

	"github.com/xuri/excelize/v2"
)

// sheetSpillSize is how much of a result sheet's XML is kept in memory
// before it goes to the stream writer's temporary file. excelize keeps
// 16 MiB (excelize.StreamChunkSize, a constant no option changes): its
// bytes.Buffer doubles to 32 MiB on the way, and the garbage collector's
// headroom over that live heap doubled it again, which put the build of a
// large result over the process's 100 MB. At 1 MiB the builder of a
// 1,000,000-row result peaks at about a third of the memory, for the same
// CPU time and the same bytes (BENCHMARKS.md, Workbooks).
const sheetSpillSize = 1 << 20

// streamBuffer is excelize's bufferedWriter (stream.go), the sheet XML a
// StreamWriter keeps in memory (buf) until Sync moves it to tmp, a file
// in tmpDir it creates then; Flush, Reader and Close (called by File.Close,
// which removes tmp) work from both. It is unexported and excelize has no
// option for Sync's threshold, so streamBufferOf reaches it through the
// StreamWriter's rawData field, and only after checking that the field's
// layout is this type's, field by field: another excelize that changes
// it gets no early spill, and TestSheetSpillReachesExcelize fails.
type streamBuffer struct {
	tmpDir string
	tmp    *os.File
	buf    bytes.Buffer
}

// streamBufferOf is sw's sheet buffer, or nil when its layout is not
// streamBuffer's.
func streamBufferOf(sw *excelize.StreamWriter) *streamBuffer {
	f := reflect.ValueOf(sw).Elem().FieldByName("rawData")
	if !f.IsValid() || !sameLayout(f.Type(), reflect.TypeFor[streamBuffer]()) {
		return nil
	}
	return (*streamBuffer)(unsafe.Pointer(f.UnsafeAddr()))
}

// sameLayout reports whether struct types a and b have the same fields,
// named and typed alike, at the same offsets.
func sameLayout(a, b reflect.Type) bool {
	if a.Kind() != reflect.Struct || b.Kind() != reflect.Struct || a.Size() != b.Size() || a.NumField() != b.NumField() {
		return false
	}
	for i := range a.NumField() {
		fa, fb := a.Field(i), b.Field(i)
		if fa.Name != fb.Name || fa.Type != fb.Type || fa.Offset != fb.Offset {
			return false
		}
	}
	return true
}

// spill moves the buffered XML to the temporary file, as excelize's Sync
// does at 16 MiB, once at least size bytes are buffered. The XML written is
// the same; only where it waits changes.
func (s *streamBuffer) spill(size int) error {
	if s == nil || size <= 0 || s.buf.Len() < size {
		return nil
	}
	if s.tmp == nil {
		f, err := os.CreateTemp(s.tmpDir, "excelize-")
		if err != nil {
			return fmt.Errorf("workbook: spool the sheet: %w", err)
		}
		s.tmp = f // File.Close removes it, as it removes its own
	}
	if _, err := s.buf.WriteTo(s.tmp); err != nil {
		return fmt.Errorf("workbook: spool the sheet: %w", err)
	}
	return nil
}
