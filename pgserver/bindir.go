package pgserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// BinDirEnv is the environment variable that, when set, names the folder
// holding the PostgreSQL server binaries (initdb, pg_ctl, postgres). It takes
// precedence over every other way of finding them.
const BinDirEnv = "PAYINTAKE_PG_BINDIR"

// installHint is the instruction appended to every "binaries not found" error.
const installHint = "install PostgreSQL 15 server binaries, e.g. `apt-get install postgresql-15`, or set " + BinDirEnv + " to their folder"

// ErrNoBinaries is returned (wrapped) by FindBinDir and Start when the
// PostgreSQL server binaries cannot be found.
var ErrNoBinaries = errors.New("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found")

// requiredBinaries are the programs the embedded cluster needs.
var requiredBinaries = []string{"initdb", "pg_ctl", "postgres"}

// FindBinDir returns the folder that holds the PostgreSQL server binaries
// initdb, pg_ctl and postgres. It looks, in order, at $PAYINTAKE_PG_BINDIR (if
// set, it must be right), the folder of pg_ctl on PATH, `pg_config --bindir`,
// and the highest version under /usr/lib/postgresql/*/bin. When nothing fits,
// the error (wrapping ErrNoBinaries) says what to install.
func FindBinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		if missing := missingBinary(dir); missing != "" {
			return "", fmt.Errorf("%w: %s=%s has no %s: %s", ErrNoBinaries, BinDirEnv, dir, missing, installHint)
		}
		return filepath.Abs(dir)
	}
	for _, dir := range candidateBinDirs() {
		if missingBinary(dir) == "" {
			return dir, nil
		}
	}
	return "", fmt.Errorf("%w on PATH, via pg_config or under /usr/lib/postgresql/*/bin: %s", ErrNoBinaries, installHint)
}

// candidateBinDirs lists the folders FindBinDir probes, best first.
func candidateBinDirs() []string {
	var dirs []string
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	if p, err := exec.LookPath("pg_config"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		out, err := exec.CommandContext(ctx, p, "--bindir").Output()
		cancel()
		if err == nil {
			if d := strings.TrimSpace(string(out)); d != "" {
				dirs = append(dirs, d)
			}
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(matches, func(i, j int) bool {
		return versionLess(filepath.Base(filepath.Dir(matches[j])), filepath.Base(filepath.Dir(matches[i])))
	})
	return append(dirs, matches...)
}

// versionLess compares dotted version strings numerically ("9.6" < "15").
func versionLess(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		na, errA := strconv.Atoi(pa[i])
		nb, errB := strconv.Atoi(pb[i])
		if errA != nil || errB != nil {
			if pa[i] != pb[i] {
				return pa[i] < pb[i]
			}
			continue
		}
		if na != nb {
			return na < nb
		}
	}
	return len(pa) < len(pb)
}

// missingBinary returns the first required binary that dir lacks, or "".
func missingBinary(dir string) string {
	for _, name := range requiredBinaries {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return name
		}
	}
	return ""
}
