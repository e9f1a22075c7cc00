package gatewayproc

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAddFlag(t *testing.T) {
	path := DefaultBinary
	fs := flag.NewFlagSet("lab", flag.ContinueOnError)
	AddFlag(fs, &path, "path of the gateway binary")
	if err := fs.Parse([]string{"-gateway", "/tmp/gw"}); err != nil {
		t.Fatal(err)
	}
	if f := fs.Lookup("gateway"); path != "/tmp/gw" || f.DefValue != DefaultBinary {
		t.Errorf("-gateway /tmp/gw set %q, default %q; want /tmp/gw, default %s", path, f.DefValue, DefaultBinary)
	}
}

func TestCheckBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "gateway")
	if err := os.WriteFile(bin, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckBinary(bin); err != nil {
		t.Errorf("CheckBinary of a file = %v; want nil", err)
	}
	err := CheckBinary(filepath.Join(dir, "none"))
	if want := "(go build -o bin/gateway ./cmd/gateway, or --gateway)"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("CheckBinary of nothing = %v; want an error saying %s", err, want)
	}
}
