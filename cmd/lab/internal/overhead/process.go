package overhead

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

const (
	// readyTimeout bounds the wait for a process to be ready.
	readyTimeout = 20 * time.Second
	// stopTimeout is how long a process has to exit after SIGTERM before
	// it is killed.
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

// cpu is the CPU time the process has used so far.
func (p *process) cpu() (time.Duration, error) {
	if err := p.gone(); err != nil {
		return 0, err
	}
	return cpuTime(p.cmd.Process.Pid)
}

// gone is an error with the end of the process's log if it has exited.
func (p *process) gone() error {
	select {
	case <-p.exited:
		return fmt.Errorf("overhead: %s exited:\n%s", p.cmd.Path, p.log())
	default:
		return nil
	}
}

// log is the end of the process's output.
func (p *process) log() string {
	out, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	return string(out[max(len(out)-logTail, 0):])
}

// stop closes the process's stdin and sends it SIGTERM, and kills it if it
// has not exited after stopTimeout.
func (p *process) stop() {
	p.stdin.Close()
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // it may have exited already
	select {
	case <-p.exited:
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}
