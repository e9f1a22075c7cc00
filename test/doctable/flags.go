package doctable

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// CheckFlags checks the table of flags under heading in the README at path against flags, each
// flag's name (without dashes) and its default as --help prints it: each flag has a row, each row
// names a flag, and a default given in backquotes in the row's second cell is the flag's.
func CheckFlags(t *testing.T, path, heading string, flags map[string]string) {
	t.Helper()
	rows, err := Rows(path, heading)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, row := range rows {
		name := strings.TrimPrefix(strings.Trim(row[0], "`"), "--")
		documented[name] = true
		def, ok := flags[name]
		if !ok {
			t.Errorf("%s's table of flags names --%s, which is not defined", path, name)
			continue
		}
		if len(row) < 2 {
			continue
		}
		if given := Quoted(row[1]); len(given) == 1 && given[0] != def {
			t.Errorf("%s gives --%s the default %q; the flag's is %q", path, name, given[0], def)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		if !documented[name] {
			t.Errorf("--%s is defined and has no row in %s's table of flags", name, path)
		}
	}
}
