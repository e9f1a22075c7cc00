// Command podinit is the first process of a container that the test kubelet (package cluster)
// runs: started by the kubelet in mount and UTS namespaces of its own, whose mounts are private,
// it sets the hostname to the Pod's name, bind-mounts each volume's directory at its mountPath
// (read-only when the container asks), makes the root filesystem read-only when the container's
// securityContext says so, and then executes the container's program in its place. The program
// so reads its files at the paths the manifests name (/etc/sluice/config.yaml,
// /var/run/secrets/kubernetes.io/serviceaccount/token) and sees no other Pod's.
//
// Usage: podinit [-hostname NAME] [-mount SRC:DST[:ro]]... [-read-only-root] -- PROGRAM ARGS...
//
// The mountpoints are created when missing, as empty directories of the host's filesystem; they
// stay, empty, when the container ends.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

type mounts []string

func (m *mounts) String() string     { return strings.Join(*m, ",") }
func (m *mounts) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	var binds mounts
	hostname := flag.String("hostname", "", "the Pod's name, as the container's hostname")
	readOnlyRoot := flag.Bool("read-only-root", false, "mount the root filesystem read-only")
	flag.Var(&binds, "mount", "SRC:DST[:ro], a volume's directory and its mountPath (repeated)")
	flag.Parse()
	if err := run(*hostname, binds, *readOnlyRoot, flag.Args()); err != nil {
		fmt.Fprintf(os.Stderr, "podinit: %v\n", err)
		os.Exit(127)
	}
}

func run(hostname string, binds []string, readOnlyRoot bool, program []string) error {
	if len(program) == 0 {
		return fmt.Errorf("no program to run")
	}
	if hostname != "" {
		if err := syscall.Sethostname([]byte(hostname)); err != nil {
			return fmt.Errorf("set the hostname: %w", err)
		}
	}
	// The mountpoints first, while the root is writable.
	for _, b := range binds {
		_, dst, _ := strings.Cut(b, ":")
		dst, _, _ = strings.Cut(dst, ":")
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return fmt.Errorf("create the mountpoint %s: %w", dst, err)
		}
	}
	for _, b := range binds {
		if err := bind(b); err != nil {
			return err
		}
	}
	// After the volumes' mounts, which a bind would otherwise copy read-only from the root's when
	// their directories are on it; only this namespace's copy of the root's mount changes.
	if readOnlyRoot {
		if err := syscall.Mount("", "/", "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("make the root read-only: %w", err)
		}
	}
	path, err := exec.LookPath(program[0])
	if err != nil {
		return err
	}
	return syscall.Exec(path, program, os.Environ())
}

// bind mounts SRC at DST, read-only when the third field is ro.
func bind(spec string) error {
	parts := strings.Split(spec, ":")
	if len(parts) < 2 || len(parts) > 3 || (len(parts) == 3 && parts[2] != "ro") {
		return fmt.Errorf("mount %q: want SRC:DST or SRC:DST:ro", spec)
	}
	src, dst := parts[0], parts[1]
	if err := syscall.Mount(src, dst, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s at %s: %w", src, dst, err)
	}
	if len(parts) == 3 {
		if err := syscall.Mount("", dst, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("make %s read-only: %w", dst, err)
		}
	}
	return nil
}
