package usage

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

const (
	// DefaultInterval is how often the gateways are polled by default.
	DefaultInterval = 15 * time.Second
	// defaultTimeout bounds one gateway's answer.
	defaultTimeout = 5 * time.Second
	// maxBytes caps a usage snapshot: one entry per provider and tenant.
	maxBytes = 8 << 20
	// Path is where a gateway's admin port serves its usage snapshot.
	Path = "/admin/usage"
	// QueuesPath is where a gateway's admin port serves what waits in its
	// queues: a snapshot that reads as a usage snapshot with only queue
	// counts, and costs the gateway no store read.
	QueuesPath = "/admin/queues"
)

// Gateway is one gateway to poll.
type Gateway struct {
	// Name identifies the gateway in status: its Pod's name, or its URL.
	Name string
	// URL is the gateway's usage endpoint.
	URL string
}

// GatewayLister lists the gateways to poll now.
type GatewayLister interface {
	Gateways(ctx context.Context) ([]Gateway, error)
}

// StaticGateways are gateways at fixed usage URLs, each named by its URL.
type StaticGateways []string

// Gateways returns the URLs as gateways.
func (s StaticGateways) Gateways(context.Context) ([]Gateway, error) {
	out := make([]Gateway, len(s))
	for i, u := range s {
		out[i] = Gateway{Name: u, URL: u}
	}
	return out, nil
}

// AllGateways are the gateways of every lister in it.
type AllGateways []GatewayLister

// Gateways lists the gateways of each lister in turn, and fails if one fails.
func (a AllGateways) Gateways(ctx context.Context) ([]Gateway, error) {
	var out []Gateway
	for _, l := range a {
		g, err := l.Gateways(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, g...)
	}
	return out, nil
}

// PodGateways needs to read the Pods, for make manifests.
//
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// PodGateways are the running gateway Pods of a namespace that match a
// selector, polled on their admin port.
type PodGateways struct {
	// Reader lists the Pods; in a manager, its cache.
	Reader client.Reader
	// Namespace is the Pods' namespace.
	Namespace string
	// Selector selects the gateway Pods.
	Selector labels.Selector
	// Port is the gateways' admin port.
	Port int32
	// Path is the snapshot to poll on that port: Path or QueuesPath. Empty
	// means Path.
	Path string
}

// Gateways returns the Pods that run and have an address. A Pod that is
// starting or stopping is no gateway to count yet, or any more.
func (p *PodGateways) Gateways(ctx context.Context) ([]Gateway, error) {
	var pods corev1.PodList
	if err := p.Reader.List(ctx, &pods, client.InNamespace(p.Namespace), client.MatchingLabelsSelector{Selector: p.Selector}); err != nil {
		return nil, fmt.Errorf("usage: list gateway Pods in %s: %w", p.Namespace, err)
	}
	var out []Gateway
	for _, pod := range pods.Items {
		if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" || pod.DeletionTimestamp != nil {
			continue
		}
		host := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(p.Port)))
		out = append(out, Gateway{Name: pod.Name, URL: "http://" + host + cmp.Or(p.Path, Path)})
	}
	return out, nil
}

// Poller polls every gateway's usage snapshot, keeps the sum and, when
// Record is set, the durable record, and sends an update after each poll.
// Poll polls once; Start polls on a ticker until its context ends, so that a
// manager can run it. Gateways must be set; the other fields have defaults.
// It is safe for concurrent use.
type Poller struct {
	// Namespace is the gateways' namespace, whose objects the usage
	// describes.
	Namespace string
	// Gateways lists the gateways to poll.
	Gateways GatewayLister
	// Client makes the requests. Nil means a client with a 5s timeout.
	Client *http.Client
	// AdminTokenFile is the file of the token the gateways' admin endpoints
	// ask for (see gatewayv1.ReadAdminToken), read at each request, so that
	// a Secret's change takes effect. Empty sends none.
	AdminTokenFile string
	// Interval is the time between polls. Zero means DefaultInterval.
	Interval time.Duration
	// Clock ticks the polls. Nil means the real clock.
	Clock clock.WithTicker
	// Updates receives an event naming Namespace after each poll. Nil means
	// none.
	Updates chan<- event.GenericEvent
	// Record keeps the durable record of the calendar windows: after each
	// poll, one gateway that answered is asked for its record, which is
	// merged into the record Record holds and written back (see
	// MergeRecord). Nil means no record is kept.
	Record RecordStore

	mu     sync.Mutex
	last   map[string]*gatewayv1.Usage // each gateway's last snapshot, by name
	totals *Totals

	recordMu sync.Mutex // held while the record is read, merged and written
}

// Start polls at once and then every Interval, until ctx is done.
func (p *Poller) Start(ctx context.Context) error {
	clk, interval := p.Clock, p.Interval
	if clk == nil {
		clk = clock.RealClock{}
	}
	if interval <= 0 {
		interval = DefaultInterval
	}
	ticker := clk.NewTicker(interval)
	defer ticker.Stop()
	for {
		p.Poll(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// Usage returns the sum of the last poll, or nil before the first poll or
// for another namespace.
func (p *Poller) Usage(namespace string) *Totals {
	if namespace != p.Namespace {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.totals
}

// Poll polls every gateway once, concurrently, and sums what they and the
// silent ones last said; then it keeps the durable record from one of
// those that answered. When the gateways cannot be listed, the last sum
// stands.
func (p *Poller) Poll(ctx context.Context) {
	gateways, err := p.Gateways.Gateways(ctx)
	if err != nil {
		log.FromContext(ctx).Error(err, "Cannot list the gateways; usage in status stays as it was")
		return
	}
	reports := p.fetchAll(ctx, gateways)
	last := map[string]*gatewayv1.Usage{}
	var answered []Gateway
	for i, r := range reports {
		if r.Usage != nil {
			last[r.Gateway] = r.Usage
		}
		if r.Err == nil {
			answered = append(answered, gateways[i])
		}
	}
	totals := Sum(reports)
	totals.Record = p.keepRecord(ctx, answered)
	p.mu.Lock()
	p.last, p.totals = last, &totals
	p.mu.Unlock()
	p.notify(ctx)
}

// fetchAll asks every gateway at once. A gateway that does not answer keeps
// its last snapshot, with the error.
func (p *Poller) fetchAll(ctx context.Context, gateways []Gateway) []GatewayReport {
	p.mu.Lock()
	last := p.last
	p.mu.Unlock()
	reports := make([]GatewayReport, len(gateways))
	var wg sync.WaitGroup
	for i, g := range gateways {
		wg.Go(func() {
			u, err := p.fetch(ctx, g.URL)
			if err != nil {
				u = last[g.Name]
			}
			reports[i] = GatewayReport{Gateway: g.Name, Usage: u, Err: err}
		})
	}
	wg.Wait()
	return reports
}

// fetch reads one gateway's usage snapshot.
func (p *Poller) fetch(ctx context.Context, url string) (*gatewayv1.Usage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	var u gatewayv1.Usage
	if err := p.do(req, maxBytes, "usage", &u); err != nil {
		return nil, err
	}
	return &u, nil
}

// do sends req and decodes its answer, at most limit bytes of JSON, into v,
// which what names in errors. An answer other than 200 OK is an error.
func (p *Poller) do(req *http.Request, limit int64, what string, v any) error {
	if err := p.authorize(req); err != nil {
		return err
	}
	resp, err := p.client().Do(req)
	if err != nil {
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = ue.Err // the report names the gateway; the URL again is noise
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, limit))
		return fmt.Errorf("answered %s", resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, limit)).Decode(v); err != nil {
		return fmt.Errorf("decode %s: %w", what, err)
	}
	return nil
}

// authorize gives req the admin token, when there is one.
func (p *Poller) authorize(req *http.Request) error {
	if p.AdminTokenFile == "" {
		return nil
	}
	token, err := gatewayv1.ReadAdminToken(p.AdminTokenFile)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return nil
}

// now is the clock's time.
func (p *Poller) now() time.Time {
	if p.Clock == nil {
		return time.Now()
	}
	return p.Clock.Now()
}

func (p *Poller) client() *http.Client {
	if p.Client != nil {
		return p.Client
	}
	return &http.Client{Timeout: defaultTimeout}
}

// notify sends an update naming the namespace, unless ctx is done first.
func (p *Poller) notify(ctx context.Context) {
	if p.Updates == nil {
		return
	}
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace}}
	select {
	case p.Updates <- event.GenericEvent{Object: obj}:
	case <-ctx.Done():
	}
}
