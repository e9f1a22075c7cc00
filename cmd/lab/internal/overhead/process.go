package overhead

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/sluicehq/sluice/cmd/lab/internal/gatewayproc"
)

const (
	// readyTimeout bounds the wait for the proxy to listen.
	readyTimeout = 20 * time.Second
	// stopTimeout is how long the bare proxy has to shut down.
	stopTimeout = 10 * time.Second
	// logTail is how much of a process's output an error quotes.
	logTail = 4 << 10
)

// process is a child process the run started: the bare proxy or the
// gateway, its output going to a log file. Its methods are safe for
// concurrent use.
type process struct {
	cmd     *exec.Cmd
	logPath string
	stdin   io.Closer
	exited  chan struct{}
}

// startProcess starts cmd with its output, and its stdout unless cmd has
// one, in a log file at logPath, and a stdin that stop closes.
func startProcess(cmd *exec.Cmd, logPath string) (*process, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("overhead: log of %s: %w", cmd.Path, err)
	}
	if cmd.Stdout == nil {
		cmd.Stdout = log
	}
	cmd.Stderr = log
	cmd.SysProcAttr = sysProcAttr()
	stdin, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("overhead: start %s: %w", cmd.Path, err)
	}
	p := &process{cmd: cmd, logPath: logPath, stdin: stdin, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // how it ended is in its log
		log.Close()
		close(p.exited)
	}()
	return p, nil
}

// child is a process the run started and measures: the bare proxy (a process) or the gateway
// (a gatewayproc.Gateway).
type child interface {
	Pid() int
	Exited() <-chan struct{}
	Log() string
	Stop()
}

// cpuOf is the CPU time a child has used so far, or an error with the end of its log if it has
// exited.
func cpuOf(c child) (time.Duration, error) {
	select {
	case <-c.Exited():
		return 0, fmt.Errorf("overhead: process %d exited:\n%s", c.Pid(), c.Log())
	default:
	}
	return cpuTime(c.Pid())
}

// Pid is the process's id.
func (p *process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *process) Exited() <-chan struct{} { return p.exited }

// Log is the end of the process's output.
func (p *process) Log() string {
	out, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(out[max(len(out)-logTail, 0):])
}

// Stop closes the process's stdin and ends it as gatewayproc.Terminate does.
func (p *process) Stop() {
	p.stdin.Close()
	gatewayproc.Terminate(p.cmd, p.exited)
}
