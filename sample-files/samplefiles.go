// Package samplefiles embeds the sample partner files, so that
// `payintake serve --demo` can load them whatever the current directory.
package samplefiles

import "embed"

// FS holds every sample file (*.csv) by its name.
//
//go:embed *.csv
var FS embed.FS
