package main

import (
	"flag"
	"testing"

	"github.com/sluicehq/sluice/test/doctable"
)

// TestEveryFlagHasARowInTheREADME checks the table of flags in the gateway's README against the
// flags the gateway defines: each has a row, each row names a flag, and a default in backquotes
// is the flag's.
func TestEveryFlagHasARowInTheREADME(t *testing.T) {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	defineFlags(fs, &commandLine{})
	defaults := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { defaults[f.Name] = f.DefValue })
	doctable.CheckFlags(t, "README.md", "## Flags and environment", defaults)
}
