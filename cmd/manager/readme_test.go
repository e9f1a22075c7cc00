package main

import (
	"flag"
	"testing"

	"github.com/sluicehq/sluice/test/doctable"
)

// TestEveryFlagHasARowInTheREADME checks the table of flags in the manager's README against the
// flags the manager defines: each has a row, each row names a flag, and a default in backquotes
// is the flag's.
func TestEveryFlagHasARowInTheREADME(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "")
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	defineFlags(fs, &options{})
	defaults := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { defaults[f.Name] = f.DefValue })
	doctable.CheckFlags(t, "README.md", "## Flags", defaults)
}
