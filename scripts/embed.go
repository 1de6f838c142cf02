// Package scripts carries the repository's shell scripts that the payintake
// binary runs itself, so that the binary and the source tree run the same
// text.
package scripts

import _ "embed"

//go:embed install-deps.sh
var installDeps string

// InstallDeps is install-deps.sh: the one list of Debian packages payintake
// needs, with the checks that find what is missing. Run it with bash:
// `bash -c SCRIPT NAME [--dry-run] serve|test` (NAME prefixes its messages).
func InstallDeps() string { return installDeps }
