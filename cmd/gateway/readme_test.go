package main

import (
	"flag"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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

// TestEveryPackageHasARowInTheREADME checks the table of the gateway's packages in its README
// against the directories under internal/: each has a row, and each row names one.
func TestEveryPackageHasARowInTheREADME(t *testing.T) {
	entries, err := os.ReadDir("internal")
	if err != nil {
		t.Fatal(err)
	}
	var packages []string
	for _, e := range entries {
		if e.IsDir() {
			packages = append(packages, e.Name())
		}
	}
	rows, err := doctable.Rows("README.md", "## Its code")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, row := range rows {
		documented = append(documented, strings.Trim(row[0], "`"))
	}
	slices.Sort(documented)
	if diff := cmp.Diff(documented, packages); diff != "" {
		t.Errorf("the README's packages (-documented +under internal/):\n%s", diff)
	}
}
