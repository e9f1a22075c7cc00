package main

import (
	"flag"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/test/doctable"
)

// TestEveryFlagHasARowInTheREADME checks the table of flags in the gateway's README against the
// flags the gateway defines: each has a row, each row names a flag, and a default in backquotes
// is the flag's.
func TestEveryFlagHasARowInTheREADME(t *testing.T) {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	defineFlags(fs, &commandLine{})
	rows, err := doctable.Rows("README.md", "## Flags and environment")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, row := range rows {
		name := strings.TrimPrefix(strings.Trim(row[0], "`"), "--")
		documented = append(documented, name)
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("the README's table of flags names --%s, which the gateway does not define", name)
			continue
		}
		if def := doctable.Quoted(row[1]); len(def) == 1 && def[0] != f.DefValue {
			t.Errorf("the README gives --%s the default %q; the gateway's is %q", name, def[0], f.DefValue)
		}
	}
	fs.VisitAll(func(f *flag.Flag) {
		if !slices.Contains(documented, f.Name) {
			t.Errorf("the gateway defines --%s, which has no row in the README's table of flags", f.Name)
		}
	})
}
