package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// maxProbePeriod caps a readiness probe's period, so that a test does not wait 10 s for a Pod
// whose server is up: periodSeconds is honoured only up to it.
const maxProbePeriod = 2 * time.Second

// probeClient is the kubelet's: it does not verify an HTTPS server's certificate, nor follow a
// redirect to another host.
var probeClient = &http.Client{
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true},
}

// probeReadiness runs the container's readiness probe while it runs and reports the Pod's
// readiness when it changes: ready after successThreshold successes, not ready after
// failureThreshold failures. A container without a readiness probe is ready while it runs.
func (c *runningContainer) probeReadiness(ctx context.Context) {
	probe := c.spec.ReadinessProbe
	period, failures, successes := time.Second, int32(3), int32(1)
	if probe != nil {
		period = min(time.Duration(max(probe.PeriodSeconds, 1))*time.Second, maxProbePeriod)
		failures, successes = max(probe.FailureThreshold, 1), max(probe.SuccessThreshold, 1)
		sleepCtx(ctx, time.Duration(probe.InitialDelaySeconds)*time.Second)
	}
	var passed, failed int32
	for ctx.Err() == nil {
		c.mu.Lock()
		running, ready := c.process != nil && !c.restartWait, c.ready
		c.mu.Unlock()
		ok := running && (probe == nil || c.pod.probe(ctx, c.spec, probe) == nil)
		if ok {
			passed, failed = passed+1, 0
		} else {
			passed, failed = 0, failed+1
		}
		switch {
		case !ready && running && passed >= successes:
			c.setReady(ctx, true)
		case ready && (!running || failed >= failures):
			c.setReady(ctx, false)
		}
		sleepCtx(ctx, period)
	}
}

func (c *runningContainer) setReady(ctx context.Context, ready bool) {
	c.mu.Lock()
	c.ready = ready
	c.mu.Unlock()
	c.pod.writeStatus(ctx)
}

// probe runs one probe against the Pod's address.
func (p *runningPod) probe(ctx context.Context, c corev1.Container, probe *corev1.Probe) error {
	timeout := time.Duration(max(probe.TimeoutSeconds, 1)) * time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case probe.HTTPGet != nil:
		return p.probeHTTP(ctx, c, probe.HTTPGet)
	case probe.TCPSocket != nil:
		port, err := containerPort(c, probe.TCPSocket.Port)
		if err != nil {
			return err
		}
		host := probe.TCPSocket.Host
		if host == "" {
			host = p.ip
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	case probe.Exec != nil:
		// The command runs on the host, not in the container's namespaces.
		return exec.CommandContext(ctx, probe.Exec.Command[0], probe.Exec.Command[1:]...).Run()
	}
	return fmt.Errorf("a probe of a kind not supported")
}

func (p *runningPod) probeHTTP(ctx context.Context, c corev1.Container, get *corev1.HTTPGetAction) error {
	port, err := containerPort(c, get.Port)
	if err != nil {
		return err
	}
	host, scheme := get.Host, "http"
	if host == "" {
		host = p.ip
	}
	if get.Scheme == corev1.URISchemeHTTPS {
		scheme = "https"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+net.JoinHostPort(host, strconv.Itoa(port))+get.Path, nil)
	if err != nil {
		return err
	}
	for _, h := range get.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("%s: %s", req.URL, resp.Status)
	}
	return nil
}

// containerPort resolves a probe's port, a number or the name of one of the container's ports.
func containerPort(c corev1.Container, port intstr.IntOrString) (int, error) {
	if port.Type == intstr.Int {
		return port.IntValue(), nil
	}
	for _, p := range c.Ports {
		if p.Name == port.StrVal {
			return int(p.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("container %s has no port named %s", c.Name, port.StrVal)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
