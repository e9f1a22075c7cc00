// Package proc runs the processes a test needs (servers, simulators, control-plane parts) and
// stops them, by process group, when the test ends.
package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// stopGrace is how long a process has to exit after SIGTERM before it is killed.
const stopGrace = 10 * time.Second

// Process is a running child process. Its output goes to a log file that the test prints when it
// fails. A Process is safe for concurrent use.
type Process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error // the result of Wait; read only after done is closed
	once    sync.Once
	stopped atomic.Bool // Stop or Kill was called
}

// Start starts cmd in a process group of its own (keeping the rest of its SysProcAttr), sends its output to a log file in a temporary
// directory, and stops it when the test ends.
func Start(t testing.TB, name string, cmd *exec.Cmd) *Process {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("proc: create log for %s: %v", name, err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = sysProcAttr(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("proc: start %s: %v", name, err)
	}
	p := &Process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("proc: output of %s:\n%s", name, p.Log())
		}
	})
	return p
}

// Pid returns the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// State returns how the process exited, or nil while it runs.
func (p *Process) State() *os.ProcessState {
	select {
	case <-p.done:
		return p.cmd.ProcessState
	default:
		return nil
	}
}

// Stopped reports whether Stop or Kill was called: an exit since then was asked for, not the
// process's own.
func (p *Process) Stopped() bool { return p.stopped.Load() }

// Exited returns a channel that is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.done }

// Log returns what the process has written so far.
func (p *Process) Log() string {
	out, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(out)
}

// Stop sends SIGTERM to the process group, waits up to stopGrace, then kills it. It returns the
// process's exit error, if any, other than the signal it was stopped with. Stop may be called more
// than once.
func (p *Process) Stop() error {
	p.stopped.Store(true)
	p.once.Do(func() {
		signalGroup(p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopGrace):
			signalGroup(p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
	var exit *exec.ExitError
	if errors.As(p.err, &exit) && !exit.Exited() {
		return nil // ended by our signal
	}
	return p.err
}

// Kill sends SIGKILL to the process group, as a crash or the kernel's OOM killer would end it,
// and waits until the process has exited. It may be called more than once, and before Stop.
func (p *Process) Kill() {
	p.stopped.Store(true)
	p.once.Do(func() {
		signalGroup(p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	})
}

func signalGroup(pid int, sig syscall.Signal) {
	// A negative pid signals the whole group, so children of the process stop too.
	if err := syscall.Kill(-pid, sig); err != nil {
		_ = syscall.Kill(pid, sig)
	}
}

// Build compiles the commands of Sluice named by their directories under cmd (gateway, lab, ...)
// into dir, once for a package's tests, and returns each binary's path in that order. The
// compiler's output goes to standard error.
func Build(dir string, commands ...string) ([]string, error) {
	args := []string{"build", "-o", dir + "/"}
	bins := make([]string, len(commands))
	for i, c := range commands {
		args = append(args, "github.com/sluicehq/sluice/cmd/"+c)
		bins[i] = filepath.Join(dir, c)
	}
	build := exec.Command("go", args...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("build %v: %w", commands, err)
	}
	return bins, nil
}
