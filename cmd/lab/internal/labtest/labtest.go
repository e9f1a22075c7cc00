// Package labtest is what the tests of the lab's runs share: the gateway binary, built once for
// a package's tests from this module's source, and the parsing of a run's flags.
package labtest

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// gatewayPackage is the gateway's main package.
const gatewayPackage = "github.com/sluicehq/sluice/cmd/gateway"

// Main builds the gateway binary into a temporary directory, unless -short, sets *gateway to its
// path (leaving it empty with -short), runs m's tests and removes the directory. It returns the
// exit code for os.Exit:
//
//	func TestMain(m *testing.M) { os.Exit(labtest.Main(m, &gatewayBin)) }
func Main(m *testing.M, gateway *string) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "lab-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "labtest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *gateway, err = build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// ParseFlags is opts with args parsed by the flags its AddFlags registers, on a FlagSet of its
// own that prints nothing, and the FlagSet's error:
//
//	got, err := labtest.ParseFlags(DefaultOptions(), "-step", "1s")
func ParseFlags[O any, P interface {
	*O
	AddFlags(*flag.FlagSet)
}](opts O, args ...string) (O, error) {
	fs := flag.NewFlagSet("lab", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	P(&opts).AddFlags(fs)
	err := fs.Parse(args)
	return opts, err
}

// build builds the gateway binary into dir and returns its path.
func build(dir string) (string, error) {
	bin := filepath.Join(dir, "gateway")
	cmd := exec.Command("go", "build", "-o", bin, gatewayPackage)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("labtest: build the gateway: %w", err)
	}
	return bin, nil
}
