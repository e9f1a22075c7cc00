package doctable

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const readme = "# Title\n\n## Flags\n\nText.\n\n| flag | default |\n|---|---|\n| `--a` | `x|y` |\n| `--b` | none |\n\n### More\n\n| k | v |\n|---|---|\n| c | d |\n\n## Other\n\n| e | f |\n|---|---|\n| g | h |\n"

func TestRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(path, []byte(readme), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := Rows(path, "## Flags")
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"`--a`", "`x|y`"}, {"`--b`", "none"}, {"c", "d"}}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("Rows (-got +want):\n%s", diff)
	}
	if _, err := Rows(path, "## Missing"); err == nil {
		t.Error("Rows of a heading that is not there: nil error; want one")
	}
	if got, want := Quoted("`--a`, `--b` and c"), []string{"--a", "--b"}; !cmp.Equal(got, want) {
		t.Errorf("Quoted = %q; want %q", got, want)
	}
}
