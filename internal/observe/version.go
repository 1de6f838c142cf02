package observe

import (
	"runtime/debug"
	"strings"
)

// Build says what this binary was built from, as Go recorded it in the
// binary (runtime/debug.ReadBuildInfo): the main module's version (from
// the VCS tag, or a pseudo-version, since Go 1.24), the VCS revision, and
// the Go version. Nothing is set at link time, so every way of building
// (go build, go install, go run) says the same.
type Build struct {
	Version   string // v1.4.0, v0.0.0-20261203095142-c3c0051a1b2c+dirty, or devel
	Revision  string // the VCS commit, or unknown
	Modified  bool   // built from a work tree with changes not committed
	GoVersion string
}

// BuildInfo reads what Go recorded of this binary's build.
func BuildInfo() Build {
	b := Build{Version: "devel", Revision: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.GoVersion = bi.GoVersion
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		b.Version = v
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the one line `payintake version` prints.
func (b Build) String() string {
	var s strings.Builder
	s.WriteString("payintake " + b.Version + " (revision " + b.Revision)
	if b.Modified {
		s.WriteString(", modified")
	}
	s.WriteString(", " + b.GoVersion + ")")
	return s.String()
}

// UserAgent is the User-Agent of payintake's outgoing requests: the
// component and the version, so that a receiver's logs say which release
// sent what.
func UserAgent(component string) string {
	return "payintake-" + component + "/" + BuildInfo().Version
}
