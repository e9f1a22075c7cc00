package main

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/test/doctable"
)

// TestEveryFlagHasARowInTheREADME checks the table of flags in the adapter's README against the
// flags the adapter defines beside those of every aggregated API server: each has a row, each row
// names a flag, and a default in backquotes is the flag's.
func TestEveryFlagHasARowInTheREADME(t *testing.T) {
	fs := pflag.NewFlagSet("metrics-adapter", pflag.ContinueOnError)
	(&adapter{}).addFlags(fs)
	defaults := map[string]string{}
	fs.VisitAll(func(f *pflag.Flag) { defaults[f.Name] = f.DefValue })
	doctable.CheckFlags(t, "README.md", "## Flags", defaults)
}
