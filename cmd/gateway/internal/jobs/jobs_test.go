package jobs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/test/redisserver"
)

func TestApply(t *testing.T) {
	now := time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)
	retry := Outcome{Err: "the provider answered 500", Retry: true}
	cases := []struct {
		name         string
		state        State
		attempts     int
		event        event
		outcome      Outcome
		wantState    State
		wantAttempts int
		wantError    string // a substring; empty means none
		wantErr      error
		late         bool // the finish is of the attempt before the job's latest
	}{
		{name: "taken", state: Queued, event: take, wantState: Running, wantAttempts: 1},
		{name: "taken again after a failed attempt", state: Queued, attempts: 1, event: take, wantState: Running, wantAttempts: 2},
		{name: "reclaimed from a dead replica", state: Running, attempts: 1, event: take, wantState: Running, wantAttempts: 2,
			wantError: "without an answer"},
		{name: "reclaimed after its last attempt died", state: Running, attempts: 3, event: take, wantState: Failed, wantAttempts: 3,
			wantError: "gave up after 3 attempts"},
		{name: "succeeds", state: Running, attempts: 1, event: finish, outcome: Outcome{Status: 200, Result: []byte("{}")},
			wantState: Succeeded, wantAttempts: 1},
		{name: "a failure another attempt may fix queues it", state: Running, attempts: 1, event: finish, outcome: retry,
			wantState: Queued, wantAttempts: 1, wantError: "500"},
		{name: "the last attempt's failure fails it", state: Running, attempts: 3, event: finish, outcome: retry,
			wantState: Failed, wantAttempts: 3, wantError: "gave up after 3 attempts; the last: the provider answered 500"},
		{name: "a failure no attempt can fix fails it at once", state: Running, attempts: 1, event: finish,
			outcome: Outcome{Err: "the provider answered 400"}, wantState: Failed, wantAttempts: 1, wantError: "400"},
		{name: "a queued job is cancelled", state: Queued, event: cancel, wantState: Cancelled},
		{name: "a running job is cancelled", state: Running, attempts: 1, event: cancel, wantState: Cancelled, wantAttempts: 1},
		{name: "a cancelled job is not taken", state: Cancelled, event: take, wantState: Cancelled, wantErr: ErrFinished},
		{name: "a finished job is not cancelled", state: Succeeded, attempts: 1, event: cancel, wantState: Succeeded, wantAttempts: 1, wantErr: ErrFinished},
		{name: "an attempt that ends after a cancel changes nothing", state: Cancelled, attempts: 1, event: finish,
			outcome: Outcome{Status: 200}, wantState: Cancelled, wantAttempts: 1, wantErr: ErrFinished},
		{name: "only a running job finishes", state: Queued, event: finish, wantState: Queued, wantErr: ErrNotRunning},
		{name: "an attempt taken over by another changes nothing", state: Running, attempts: 2, event: finish, late: true,
			outcome: retry, wantState: Running, wantAttempts: 2, wantErr: ErrNotRunning},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := &Job{ID: "job_1", State: tc.state, Attempts: tc.attempts}
			a := j.Attempt()
			if tc.late {
				a.N--
			}
			err := j.apply(tc.event, a, tc.outcome, 3, now)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("apply() error = %v; want %v", err, tc.wantErr)
			}
			if j.State != tc.wantState || j.Attempts != tc.wantAttempts {
				t.Errorf("job is %s after %d attempts; want %s after %d", j.State, j.Attempts, tc.wantState, tc.wantAttempts)
			}
			if !strings.Contains(j.Error, tc.wantError) || (tc.wantError == "" && j.Error != "") {
				t.Errorf("job error = %q; want it to say %q", j.Error, tc.wantError)
			}
		})
	}
}

// store is what both stores offer, as the gateway uses it.
type store interface {
	Add(ctx context.Context, j *Job) error
	Get(ctx context.Context, id string) (*Job, error)
	List(ctx context.Context, o Owner, state State) ([]*Job, error)
	Cancel(ctx context.Context, id string) (*Job, error)
	Take(ctx context.Context) (*Job, error)
	Renew(ctx context.Context) ([]string, error)
	Leave(ctx context.Context) error
	Finish(ctx context.Context, a Attempt, o Outcome) (*Job, error)
	Hold(ctx context.Context, a Attempt, held Cost) error
	Charge(ctx context.Context, a Attempt) (bool, error)
}

var (
	_ store = (*Memory)(nil)
	_ store = (*Redis)(nil)
)

// stores returns a fresh store of each kind with these options.
func stores(t *testing.T, opts Options) map[string]store {
	out := map[string]store{"memory": NewMemory(opts)}
	if !testing.Short() {
		srv := redisserver.Start(t)
		out["redis"] = NewRedis(srv.Client(t), "test", opts)
	}
	return out
}

func TestStores(t *testing.T) {
	steps := []struct {
		name string
		run  func(t *testing.T, s store)
	}{
		{"a job succeeds", succeeds},
		{"a job fails after its attempts", failsAfterItsAttempts},
		{"a cancelled job is never taken", cancelledIsNotTaken},
		{"a job cancelled while running keeps its state", cancelledWhileRunning},
		{"a job is charged once", chargedOnce},
		{"an unknown job is not found", unknownNotFound},
	}
	opts := Options{MaxAttempts: 2, ReclaimAfter: 20 * time.Millisecond, ResultTTL: time.Hour}
	for _, step := range steps {
		for kind, s := range stores(t, opts) {
			t.Run(kind+"/"+step.name, func(t *testing.T) { step.run(t, s) })
		}
	}
}

// add adds a job of tenant's user alice, whose tenant id is the tenant's name.
func add(t *testing.T, s store, tenant string) *Job {
	t.Helper()
	return addAs(t, s, tenant, "alice", `{"model":"m"}`)
}

func addAs(t *testing.T, s store, tenant, user, body string) *Job {
	t.Helper()
	j := &Job{Tenant: tenant, TenantID: tenant, User: user, KeyHash: "abc", Endpoint: "chat", Body: []byte(body)}
	if err := s.Add(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	return j
}

func takeOne(t *testing.T, s store) *Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	j, err := s.Take(ctx)
	if err != nil {
		t.Fatalf("Take() error = %v", err)
	}
	return j
}

func succeeds(t *testing.T, s store) {
	ctx := context.Background()
	added := add(t, s, "acme")
	j := takeOne(t, s)
	if j.ID != added.ID || j.State != Running || j.Attempts != 1 || string(j.Body) != `{"model":"m"}` {
		t.Fatalf("took %+v; want the job running, its first attempt", j)
	}
	done, err := s.Finish(ctx, j.Attempt(), Outcome{Status: 200, Result: []byte(`{"ok":true}`)})
	if err != nil || done.State != Succeeded {
		t.Fatalf("Finish() = %+v, %v; want succeeded", done, err)
	}
	got, err := s.Get(ctx, j.ID)
	if err != nil || got.State != Succeeded || string(got.Result) != `{"ok":true}` || got.Status != 200 {
		t.Fatalf("Get() = %+v, %v; want succeeded with the result", got, err)
	}
	listed(t, s, "acme", Succeeded, j.ID)
	listed(t, s, "globex", "")
}

func listed(t *testing.T, s store, tenant string, state State, want ...string) {
	t.Helper()
	listedFor(t, s, Owner{TenantID: tenant}, state, want...)
}

func listedFor(t *testing.T, s store, o Owner, state State, want ...string) {
	t.Helper()
	jobs, err := s.List(context.Background(), o, state)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("List(%+v, %q) (-want +got):\n%s", o, state, diff)
	}
}

func failsAfterItsAttempts(t *testing.T, s store) {
	ctx := context.Background()
	add(t, s, "acme")
	j := takeOne(t, s)
	j, err := s.Finish(ctx, j.Attempt(), Outcome{Err: "the provider answered 500", Retry: true})
	if err != nil || j.State != Queued {
		t.Fatalf("after the first failed attempt: %+v, %v; want queued again", j, err)
	}
	listed(t, s, "acme", Queued, j.ID)
	j = takeOne(t, s) // after the reclaim time
	if j.State != Running || j.Attempts != 2 {
		t.Fatalf("took %+v; want its second attempt", j)
	}
	j, err = s.Finish(ctx, j.Attempt(), Outcome{Err: "the provider answered 500", Retry: true})
	if err != nil || j.State != Failed || !strings.Contains(j.Error, "gave up after 2 attempts") {
		t.Fatalf("after the last attempt: %+v, %v; want failed with the error", j, err)
	}
	listed(t, s, "acme", Failed, j.ID)
	listed(t, s, "acme", Queued)
}

func cancelledIsNotTaken(t *testing.T, s store) {
	ctx := context.Background()
	j := add(t, s, "acme")
	if c, err := s.Cancel(ctx, j.ID); err != nil || c.State != Cancelled {
		t.Fatalf("Cancel() = %+v, %v; want cancelled", c, err)
	}
	if _, err := s.Cancel(ctx, j.ID); !errors.Is(err, ErrFinished) {
		t.Errorf("second Cancel() error = %v; want ErrFinished", err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if got, err := s.Take(short); got != nil {
		t.Errorf("Take() = %+v, %v; want nothing to take", got, err)
	}
}

func cancelledWhileRunning(t *testing.T, s store) {
	ctx := context.Background()
	add(t, s, "acme")
	j := takeOne(t, s)
	if _, err := s.Cancel(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finish(ctx, j.Attempt(), Outcome{Status: 200}); !errors.Is(err, ErrFinished) {
		t.Errorf("Finish() after Cancel: %v; want ErrFinished", err)
	}
	if got, _ := s.Get(ctx, j.ID); got.State != Cancelled {
		t.Errorf("state = %s; want cancelled", got.State)
	}
}

func chargedOnce(t *testing.T, s store) {
	ctx := context.Background()
	add(t, s, "acme")
	j := takeOne(t, s)
	if err := s.Hold(ctx, j.Attempt(), Cost{Tokens: 100, MicroDollars: 300}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, j.ID); got.Held != (Cost{Tokens: 100, MicroDollars: 300}) {
		t.Errorf("held = %+v; want what Hold recorded", got.Held)
	}
	for i, want := range []bool{true, false} {
		if first, err := s.Charge(ctx, j.Attempt()); err != nil || first != want {
			t.Errorf("Charge() #%d = %v, %v; want %v", i+1, first, err, want)
		}
	}
	if got, _ := s.Get(ctx, j.ID); got.Held != (Cost{}) || !got.Charged {
		t.Errorf("after Charge: held %+v, charged %v; want nothing held, charged", got.Held, got.Charged)
	}
}

func unknownNotFound(t *testing.T, s store) {
	if _, err := s.Get(context.Background(), "job_nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get() error = %v; want ErrNotFound", err)
	}
	if _, err := s.Cancel(context.Background(), "job_nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Cancel() error = %v; want ErrNotFound", err)
	}
}

// TestRedisReclaimsAJobFromADeadReplica takes a job on one replica that then stops renewing it,
// as a dead one would; another replica takes it over once it has been idle for the reclaim time.
func TestRedisReclaimsAJobFromADeadReplica(t *testing.T) {
	srv := redisserver.Start(t)
	opts := Options{MaxAttempts: 2, ReclaimAfter: 50 * time.Millisecond}
	dead, alive := NewRedis(srv.Client(t), "dead", opts), NewRedis(srv.Client(t), "alive", opts)
	j := add(t, dead, "acme")
	if got := takeOne(t, dead); got.ID != j.ID {
		t.Fatalf("the first replica took %s; want %s", got.ID, j.ID)
	}
	got := takeOne(t, alive)
	if got.ID != j.ID || got.State != Running || got.Attempts != 2 {
		t.Fatalf("the second replica took %+v; want the job's second attempt", got)
	}
	if _, err := alive.Finish(context.Background(), got.Attempt(), Outcome{Status: 200, Result: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if n := srv.Client(t).XLen(context.Background(), streamKey("acme")).Val(); n != 0 {
		t.Errorf("the stream holds %d entries after the job ended; want 0", n)
	}
}

// TestRedisFailsAJobWhoseLastAttemptDied checks that a job reclaimed with no attempts left fails.
func TestRedisFailsAJobWhoseLastAttemptDied(t *testing.T) {
	srv := redisserver.Start(t)
	opts := Options{MaxAttempts: 1, ReclaimAfter: 50 * time.Millisecond}
	dead, alive := NewRedis(srv.Client(t), "dead", opts), NewRedis(srv.Client(t), "alive", opts)
	j := add(t, dead, "acme")
	takeOne(t, dead)
	got := takeOne(t, alive)
	if got.ID != j.ID || got.State != Failed || !strings.Contains(got.Error, "gave up after 1 attempts") {
		t.Fatalf("the second replica took %+v; want the job failed", got)
	}
	listed(t, alive, "acme", Failed, j.ID)
}

func TestATenantQueuesNoMoreThanItMay(t *testing.T) {
	ctx := context.Background()
	for kind, s := range stores(t, Options{MaxQueuedPerTenant: 2, ReclaimAfter: time.Hour}) {
		t.Run(kind, func(t *testing.T) {
			add(t, s, "acme")
			second := add(t, s, "acme")
			refused := &Job{Tenant: "acme", TenantID: "acme", Endpoint: "chat"}
			if err := s.Add(ctx, refused); !errors.Is(err, ErrTooManyQueued) {
				t.Fatalf("Add() past the limit: %v; want ErrTooManyQueued", err)
			}
			if _, err := s.Get(ctx, refused.ID); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get() of the refused job: %v; want ErrNotFound", err)
			}
			add(t, s, "globex") // another tenant has its own count
			takeOne(t, s)       // a running job is no longer queued
			add(t, s, "acme")
			if _, err := s.Cancel(ctx, second.ID); err != nil {
				t.Fatal(err)
			}
			add(t, s, "acme")
		})
	}
}

// TestATenantKeepsNoMoreFinishedJobsThanItMay creates and cancels 2,000 jobs in a loop, as a
// client churning the API would: the store keeps the newest 1,000 of them, and another tenant's
// jobs and bytes are untouched.
func TestATenantKeepsNoMoreFinishedJobsThanItMay(t *testing.T) {
	ctx := context.Background()
	for kind, s := range stores(t, Options{ReclaimAfter: time.Hour}) {
		t.Run(kind, func(t *testing.T) {
			other := add(t, s, "globex")
			var ids []string
			for range 2000 {
				j := add(t, s, "acme")
				if _, err := s.Cancel(ctx, j.ID); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, j.ID)
			}
			kept := 0
			for i, id := range ids {
				_, err := s.Get(ctx, id)
				switch {
				case err == nil:
					kept++
				case !errors.Is(err, ErrNotFound):
					t.Fatal(err)
				case i >= 1000:
					t.Errorf("job %d of 2,000 is forgotten; want the newest 1,000 kept", i+1)
				}
			}
			if kept != 1000 {
				t.Errorf("%d cancelled jobs kept; want 1,000", kept)
			}
			if list, err := s.List(ctx, Owner{TenantID: "acme"}, Cancelled); err != nil || len(list) != ListLimit || list[0].ID != ids[len(ids)-1] {
				t.Errorf("List() = %d jobs, %v; want the newest %d", len(list), err, ListLimit)
			}
			if _, err := s.Get(ctx, other.ID); err != nil {
				t.Errorf("another tenant's job: %v", err)
			}
		})
	}
}

// clock is a settable time for Options.Now.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func TestMemoryForgetsExpiredJobs(t *testing.T) {
	ctx := context.Background()
	c := &clock{now: time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)}
	m := NewMemory(Options{ResultTTL: time.Hour, Now: c.Now})
	add(t, m, "acme")
	j := takeOne(t, m)
	if _, err := m.Finish(ctx, j.Attempt(), Outcome{Status: 200}); err != nil {
		t.Fatal(err)
	}
	c.now = c.now.Add(2 * time.Hour)
	add(t, m, "acme")
	if n := len(m.jobs); n != 1 {
		t.Errorf("memory holds %d jobs; want 1: the job that expired is forgotten without being read", n)
	}
}

func TestRedisTrimsFinishedIndexesAsJobsEnd(t *testing.T) {
	ctx := context.Background()
	srv := redisserver.Start(t)
	c := &clock{now: time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)}
	s := NewRedis(srv.Client(t), "test", Options{ResultTTL: time.Hour, Now: c.Now})
	for range 2 {
		add(t, s, "acme")
		j := takeOne(t, s)
		if _, err := s.Finish(ctx, j.Attempt(), Outcome{Status: 200}); err != nil {
			t.Fatal(err)
		}
		c.now = c.now.Add(2 * time.Hour)
	}
	if n := srv.Client(t).ZCard(ctx, indexKey(Owner{TenantID: "acme"}, Succeeded)).Val(); n != 1 {
		t.Errorf("the succeeded index holds %d jobs; want 1: the expired one is trimmed when the next is added", n)
	}
}

// takenOver is a job that one replica took, then stalled past the reclaim time with, so that
// another replica took it over.
type takenOver struct {
	server         *redisserver.Server
	stalled, alive *Redis
	late, latest   *Job // the job as each replica took it: its first and second attempt
}

func takeOver(t *testing.T) takenOver {
	t.Helper()
	srv := redisserver.Start(t)
	opts := Options{MaxAttempts: 3, ReclaimAfter: 50 * time.Millisecond}
	to := takenOver{server: srv, stalled: NewRedis(srv.Client(t), "stalled", opts), alive: NewRedis(srv.Client(t), "alive", opts)}
	add(t, to.stalled, "acme")
	to.late = takeOne(t, to.stalled)
	to.latest = takeOne(t, to.alive)
	return to
}

// TestRedisRenewsOnlyWhatItStillHolds has a replica stall past the reclaim time while another
// reclaims its job: its renewal does not take the job back, and tells it the job is lost.
func TestRedisRenewsOnlyWhatItStillHolds(t *testing.T) {
	ctx := context.Background()
	to := takeOver(t)
	stalled, alive, j := to.stalled, to.alive, to.late
	lost, err := stalled.Renew(ctx)
	if err != nil || !slices.Equal(lost, []string{j.ID}) {
		t.Fatalf("Renew() on the stalled replica = %v, %v; want the job lost", lost, err)
	}
	if lost, err := alive.Renew(ctx); err != nil || len(lost) != 0 {
		t.Fatalf("Renew() on the replica that reclaimed the job = %v, %v; want nothing lost", lost, err)
	}
	pending, err := to.server.Client(t).XPendingExt(ctx, &redis.XPendingExtArgs{Stream: streamKey("acme"), Group: group, Start: "-", End: "+", Count: 10}).Result()
	if err != nil || len(pending) != 1 || pending[0].Consumer != "alive" {
		t.Errorf("pending entries: %+v, %v; want the job's, held by the replica that reclaimed it", pending, err)
	}
	if lost, err := stalled.Renew(ctx); err != nil || len(lost) != 0 {
		t.Errorf("a second Renew() on the stalled replica = %v, %v; want nothing: it holds nothing", lost, err)
	}
}

// TestRedisLateFinishIsNotRunning has a stalled replica finish its attempt after another
// replica reclaimed the job and queued it again: the late attempt is not recorded and the job's
// entry stays with the queue.
func TestRedisLateFinishIsNotRunning(t *testing.T) {
	ctx := context.Background()
	to := takeOver(t)
	stalled, alive, late, latest := to.stalled, to.alive, to.late, to.latest
	if got, err := alive.Finish(ctx, latest.Attempt(), Outcome{Err: "the provider answered 500", Retry: true}); err != nil || got.State != Queued {
		t.Fatalf("Finish() on the replica that reclaimed the job = %+v, %v; want it queued", got, err)
	}
	if _, err := stalled.Finish(ctx, late.Attempt(), Outcome{Status: 200}); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("the late Finish() error = %v; want ErrNotRunning", err)
	}
	if got := takeOne(t, alive); got.ID != late.ID || got.Attempts != 3 {
		t.Errorf("took %+v; want the job's third attempt", got)
	}
}

// TestRedisRecoversALostStream deletes a tenant's stream, as an eviction would: the next job
// added makes it and its group again, and is taken.
func TestRedisRecoversALostStream(t *testing.T) {
	ctx := context.Background()
	srv := redisserver.Start(t)
	s := NewRedis(srv.Client(t), "test", Options{})
	add(t, s, "acme")
	takeOne(t, s)
	if err := srv.Client(t).Del(ctx, streamKey("acme")).Err(); err != nil {
		t.Fatal(err)
	}
	j := add(t, s, "acme")
	if got := takeOne(t, s); got.ID != j.ID {
		t.Errorf("took %s; want %s", got.ID, j.ID)
	}
}

// TestRedisLeave checks that a replica leaves the consumer group when it stops holding nothing,
// and stays while it holds an entry that another replica must reclaim.
func TestRedisLeave(t *testing.T) {
	ctx := context.Background()
	srv := redisserver.Start(t)
	done, holding := NewRedis(srv.Client(t), "done", Options{}), NewRedis(srv.Client(t), "holding", Options{})
	add(t, done, "acme")
	j := takeOne(t, done)
	if _, err := done.Finish(ctx, j.Attempt(), Outcome{Status: 200}); err != nil {
		t.Fatal(err)
	}
	add(t, holding, "acme")
	takeOne(t, holding)
	for _, s := range []*Redis{done, holding} {
		if err := s.Leave(ctx); err != nil {
			t.Fatalf("Leave() of %s: %v", s.consumer, err)
		}
	}
	consumers, err := srv.Client(t).XInfoConsumers(ctx, streamKey("acme"), group).Result()
	var names []string
	for _, c := range consumers {
		names = append(names, c.Name)
	}
	if err != nil || !slices.Equal(names, []string{"holding"}) {
		t.Errorf("consumers after Leave: %v, %v; want only the one holding an entry", names, err)
	}
}

// TestRedisLateAttemptChangesNothing has a stalled replica end its attempt while another replica
// runs the job's next one: the late attempt neither ends the job nor changes what the running
// attempt holds, and its answer still charges the job once.
func TestRedisLateAttemptChangesNothing(t *testing.T) {
	ctx := context.Background()
	to := takeOver(t)
	stalled, alive, late, latest := to.stalled, to.alive, to.late, to.latest
	held := Cost{Tokens: 100, MicroDollars: 300}
	if err := alive.Hold(ctx, latest.Attempt(), held); err != nil {
		t.Fatal(err)
	}
	if err := stalled.Hold(ctx, late.Attempt(), Cost{}); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Hold() by the late attempt: %v; want ErrNotRunning", err)
	}
	if first, err := stalled.Charge(ctx, late.Attempt()); err != nil || !first {
		t.Errorf("Charge() by the late attempt = %v, %v; want the job's first charge", first, err)
	}
	if _, err := stalled.Finish(ctx, late.Attempt(), Outcome{Err: "the provider answered 500", Retry: true}); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Finish() by the late attempt: %v; want ErrNotRunning", err)
	}
	got, err := alive.Get(ctx, latest.ID)
	if err != nil || got.State != Running || got.Attempts != 2 || got.Held != held || !got.Charged {
		t.Fatalf("the job after the late attempt: %+v, %v; want running attempt 2, holding %+v, charged", got, err, held)
	}
	if got, err := alive.Finish(ctx, latest.Attempt(), Outcome{Status: 200}); err != nil || got.State != Succeeded {
		t.Errorf("Finish() by the running attempt = %+v, %v; want succeeded", got, err)
	}
}

// clockedStores returns a fresh store of each kind on a settable clock.
func clockedStores(t *testing.T, opts Options) (map[string]store, *clock) {
	c := &clock{now: time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)}
	opts.Now = c.Now
	return stores(t, opts), c
}

// nothingToTake checks that Take finds no job that may go.
func nothingToTake(t *testing.T, s store) {
	t.Helper()
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if got, err := s.Take(short); got != nil {
		t.Fatalf("Take() = %+v, %v; want nothing to take", got, err)
	}
}

// TestTakeGoesRoundTheTenants has one tenant queue three jobs before two others queue one each:
// the others' jobs are taken before the first tenant's second.
func TestTakeGoesRoundTheTenants(t *testing.T) {
	for kind, s := range stores(t, Options{ReclaimAfter: time.Hour}) {
		t.Run(kind, func(t *testing.T) {
			var want []string
			a1, a2, a3 := add(t, s, "acme"), add(t, s, "acme"), add(t, s, "acme")
			b1, c1 := add(t, s, "globex"), add(t, s, "initech")
			want = append(want, a1.ID, b1.ID, c1.ID, a2.ID, a3.ID)
			var got []string
			for range want {
				got = append(got, takeOne(t, s).ID)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("the order jobs were taken in (-want +got):\n%s", diff)
			}
		})
	}
}

// TestADeferredJobWaitsUncounted defers a job its own limits refused: it is not taken before its
// time, the other tenant's job is, the deferral counts no attempt, and the deferred take can no
// longer finish the job.
func TestADeferredJobWaitsUncounted(t *testing.T) {
	ctx := context.Background()
	all, c := clockedStores(t, Options{MaxAttempts: 1, ReclaimAfter: time.Hour})
	for kind, s := range all {
		t.Run(kind, func(t *testing.T) {
			a := add(t, s, "acme")
			b := add(t, s, "globex")
			taken := takeOne(t, s)
			deferred, err := s.Finish(ctx, taken.Attempt(), Outcome{Err: "the tenant's tokens per minute", NotBefore: c.now.Add(time.Minute)})
			if err != nil || deferred.State != Queued || deferred.Attempts != 0 || deferred.Deferrals != 1 {
				t.Fatalf("Finish() of a deferred attempt = %+v, %v; want queued, no attempt counted, one deferral", deferred, err)
			}
			if got := takeOne(t, s); got.ID != b.ID {
				t.Fatalf("took %s; want the other tenant's %s", got.ID, b.ID)
			}
			nothingToTake(t, s)
			c.now = c.now.Add(time.Minute)
			again := takeOne(t, s)
			if again.ID != a.ID || again.State != Running || again.Attempts != 1 || string(again.Body) != `{"model":"m"}` {
				t.Fatalf("took %+v; want %s's first attempt, with its body", again, a.ID)
			}
			if _, err := s.Finish(ctx, taken.Attempt(), Outcome{Status: 200}); !errors.Is(err, ErrNotRunning) {
				t.Errorf("Finish() by the deferred take: %v; want ErrNotRunning", err)
			}
		})
	}
}

// TestAFailedAttemptWaitsTheReclaimTime checks that a job whose attempt failed is not taken again
// before the reclaim time has passed, and is once it has.
func TestAFailedAttemptWaitsTheReclaimTime(t *testing.T) {
	ctx := context.Background()
	all, c := clockedStores(t, Options{MaxAttempts: 3, ReclaimAfter: time.Minute})
	for kind, s := range all {
		t.Run(kind, func(t *testing.T) {
			j := add(t, s, "acme")
			taken := takeOne(t, s)
			if _, err := s.Finish(ctx, taken.Attempt(), Outcome{Err: "the provider answered 500", Retry: true}); err != nil {
				t.Fatal(err)
			}
			c.now = c.now.Add(time.Minute - time.Millisecond)
			nothingToTake(t, s)
			c.now = c.now.Add(time.Millisecond)
			if got := takeOne(t, s); got.ID != j.ID || got.Attempts != 2 {
				t.Errorf("took %+v; want %s's second attempt", got, j.ID)
			}
		})
	}
}

// TestATenantHoldsNoMoreBytesThanItMay fills a tenant's bytes with a body, then with a result,
// and frees them as the result expires.
func TestATenantHoldsNoMoreBytesThanItMay(t *testing.T) {
	ctx := context.Background()
	body := `{"model":"` + strings.Repeat("m", 48) + `"}` // 60 bytes
	all, c := clockedStores(t, Options{MaxBytesPerTenant: 100, ReclaimAfter: time.Hour, ResultTTL: time.Hour})
	for kind, s := range all {
		t.Run(kind, func(t *testing.T) {
			addAs(t, s, "acme", "alice", body)
			refused := &Job{Tenant: "acme", TenantID: "acme", Endpoint: "chat", Body: []byte(body)}
			if err := s.Add(ctx, refused); !errors.Is(err, ErrTooManyBytes) {
				t.Fatalf("Add() past the bytes: %v; want ErrTooManyBytes", err)
			}
			addAs(t, s, "globex", "bob", body) // another tenant has its own bytes
			j := takeOne(t, s)
			result := []byte(strings.Repeat("r", 70))
			if done, err := s.Finish(ctx, j.Attempt(), Outcome{Status: 200, Result: result}); err != nil || done.Size != 70 {
				t.Fatalf("Finish() = %+v, %v; want the job to hold its result's 70 bytes", done, err)
			}
			if err := s.Add(ctx, refused); !errors.Is(err, ErrTooManyBytes) {
				t.Fatalf("Add() with the result kept: %v; want ErrTooManyBytes", err)
			}
			c.now = c.now.Add(2 * time.Hour)
			addAs(t, s, "acme", "alice", body) // the result expired
		})
	}
}

// TestAUserListsOnlyTheirJobs lists a tenant's jobs whole and by user.
func TestAUserListsOnlyTheirJobs(t *testing.T) {
	all, c := clockedStores(t, Options{})
	for kind, s := range all {
		t.Run(kind, func(t *testing.T) {
			alice := addAs(t, s, "acme", "alice", `{}`)
			c.now = c.now.Add(time.Second)
			bob := addAs(t, s, "acme", "bob", `{}`)
			listedFor(t, s, Owner{TenantID: "acme"}, "", bob.ID, alice.ID)
			listedFor(t, s, Owner{TenantID: "acme", User: "alice"}, "", alice.ID)
			listedFor(t, s, Owner{TenantID: "acme", User: "bob"}, Queued, bob.ID)
			listedFor(t, s, Owner{TenantID: "acme-again"}, "")
			if o := (Owner{TenantID: "acme", User: "alice"}); o.Owns(bob) || !o.Owns(alice) {
				t.Errorf("Owns(): alice's owner owns bob's job %v, alice's %v; want false, true", o.Owns(bob), o.Owns(alice))
			}
		})
	}
}

// TestListIsNewestFirstAndBounded adds one job more than List returns, the oldest finished: List
// returns the newest ListLimit, newest first, whatever their state.
func TestListIsNewestFirstAndBounded(t *testing.T) {
	ctx := context.Background()
	all, c := clockedStores(t, Options{ResultTTL: time.Hour})
	for kind, s := range all {
		t.Run(kind, func(t *testing.T) {
			var ids []string
			for range ListLimit + 1 {
				ids = append(ids, add(t, s, "acme").ID)
				c.now = c.now.Add(time.Second)
			}
			taken := takeOne(t, s)
			if _, err := s.Finish(ctx, taken.Attempt(), Outcome{Status: 200}); err != nil {
				t.Fatal(err)
			}
			slices.Reverse(ids)
			listed(t, s, "acme", "", ids[:ListLimit]...)
			listed(t, s, "acme", Queued, ids[:ListLimit]...)
		})
	}
}

// The stream's hygiene, each break checked to fail the test named (break it, run, restore):
//
//	break                                             caught by                                real Redis
//	a cancelled or expired job's entry never dropped  TestRedisStreamHygiene (XLEN, XPENDING)  yes
//	Finish after Cancel leaves the entry pending      TestRedisStreamHygiene (XPENDING)        yes
//	a finished job with no expiry                     TestRedisStreamHygiene (TTL)             yes
//	List oldest first, or not cut at ListLimit        TestListIsNewestFirstAndBounded          both stores
//	the memory store retries without its delay        TestAFailedAttemptWaitsTheReclaimTime    no
//	takes in arrival order, not round the tenants     TestTakeGoesRoundTheTenants              both stores
//	Add does not count a tenant's bytes               TestATenantHoldsNoMoreBytesThanItMay     both stores
//	a queued-again job left pending in its stream     TestRedisDeferredJobLeavesTheStream      yes

// pending is the entries of a tenant's stream: its length and those pending with a consumer.
type pending struct{ Len, Pending int64 }

func streamOf(t *testing.T, srv *redisserver.Server, tenant string) pending {
	t.Helper()
	ctx := context.Background()
	c := srv.Client(t)
	p := pending{Len: c.XLen(ctx, streamKey(tenant)).Val()}
	if info, err := c.XPending(ctx, streamKey(tenant), group).Result(); err == nil {
		p.Pending = info.Count
	} else if !strings.Contains(err.Error(), "NOGROUP") {
		t.Fatal(err)
	}
	return p
}

// TestRedisStreamHygiene checks what a job leaves in its tenant's stream and in Redis as it ends
// each way: nothing in the stream, and its key expiring.
func TestRedisStreamHygiene(t *testing.T) {
	ctx := context.Background()
	ttl := time.Hour
	cases := []struct {
		name string
		// end ends a job added to s, and returns its id.
		end func(t *testing.T, srv *redisserver.Server, s *Redis) string
		// expires says whether the job's key is left, expiring within the result TTL.
		expires bool
	}{
		{name: "succeeded", expires: true, end: func(t *testing.T, _ *redisserver.Server, s *Redis) string {
			add(t, s, "acme")
			j := takeOne(t, s)
			if _, err := s.Finish(ctx, j.Attempt(), Outcome{Status: 200, Result: []byte("{}")}); err != nil {
				t.Fatal(err)
			}
			return j.ID
		}},
		{name: "failed", expires: true, end: func(t *testing.T, _ *redisserver.Server, s *Redis) string {
			add(t, s, "acme")
			j := takeOne(t, s)
			if _, err := s.Finish(ctx, j.Attempt(), Outcome{Err: "the provider answered 400"}); err != nil {
				t.Fatal(err)
			}
			return j.ID
		}},
		{name: "cancelled while queued, then reached", expires: true, end: func(t *testing.T, _ *redisserver.Server, s *Redis) string {
			j := add(t, s, "acme")
			if _, err := s.Cancel(ctx, j.ID); err != nil {
				t.Fatal(err)
			}
			nothingToTake(t, s)
			return j.ID
		}},
		{name: "expired while queued, then reached", end: func(t *testing.T, srv *redisserver.Server, s *Redis) string {
			j := add(t, s, "acme")
			srv.Client(t).Del(ctx, jobKey(j.ID)) // as an expiry would
			nothingToTake(t, s)
			return j.ID
		}},
		{name: "finished after it was cancelled", expires: true, end: func(t *testing.T, _ *redisserver.Server, s *Redis) string {
			add(t, s, "acme")
			j := takeOne(t, s)
			if _, err := s.Cancel(ctx, j.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Finish(ctx, j.Attempt(), Outcome{Status: 200}); !errors.Is(err, ErrFinished) {
				t.Fatalf("Finish() after Cancel: %v; want ErrFinished", err)
			}
			return j.ID
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := redisserver.Start(t)
			s := NewRedis(srv.Client(t), "test", Options{ResultTTL: ttl})
			id := tc.end(t, srv, s)
			if got := streamOf(t, srv, "acme"); got != (pending{}) {
				t.Errorf("the tenant's stream after the job ended: %+v; want empty, nothing pending", got)
			}
			left := srv.Client(t).TTL(ctx, jobKey(id)).Val()
			switch {
			case tc.expires && (left <= 0 || left > ttl):
				t.Errorf("the job's key expires in %v; want within the result TTL %v", left, ttl)
			case !tc.expires && left != -2:
				t.Errorf("the job's key TTL is %v; want the key gone", left)
			}
		})
	}
}

// TestRedisDeferredJobLeavesTheStream checks that a job queued again waits out of its stream,
// and that its tenant keeps its turn while it does.
func TestRedisDeferredJobLeavesTheStream(t *testing.T) {
	ctx := context.Background()
	srv := redisserver.Start(t)
	c := &clock{now: time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC)}
	s := NewRedis(srv.Client(t), "test", Options{ReclaimAfter: time.Hour, Now: c.Now})
	add(t, s, "acme")
	j := takeOne(t, s)
	if _, err := s.Finish(ctx, j.Attempt(), Outcome{Err: "limited", NotBefore: c.now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	nothingToTake(t, s)
	if got := streamOf(t, srv, "acme"); got != (pending{}) {
		t.Errorf("the tenant's stream while its job waits: %+v; want empty, nothing pending", got)
	}
	if n := srv.Client(t).ZCard(ctx, laterKey("acme")).Val(); n != 1 {
		t.Errorf("the tenant's jobs for later hold %d; want 1", n)
	}
	if turns := srv.Client(t).ZRange(ctx, turnsKey, 0, -1).Val(); !slices.Equal(turns, []string{"acme"}) {
		t.Errorf("turns = %v; want the waiting tenant's", turns)
	}
}

// TestABatchsLinesLeaveTheTenantsFinishedJobsBe ends more of a batch's lines than a tenant keeps
// finished jobs: the tenant's own finished job is still kept and listed, the lines are not
// listed, and what they held in bytes is given back.
func TestABatchsLinesLeaveTheTenantsFinishedJobsBe(t *testing.T) {
	ctx := context.Background()
	for kind, s := range stores(t, Options{ReclaimAfter: time.Hour, MaxFinishedPerTenant: 10, MaxBytesPerTenant: 1000}) {
		t.Run(kind, func(t *testing.T) {
			own := add(t, s, "acme")
			if _, err := s.Cancel(ctx, own.ID); err != nil {
				t.Fatal(err)
			}
			for i := range 30 {
				line := &Job{Tenant: "acme", TenantID: "acme", User: "alice", KeyHash: "abc", Endpoint: "chat", Body: []byte(`{"model":"m"}`),
					Batch: "batch_1", Line: i + 1, CustomID: fmt.Sprint(i)}
				if err := s.Add(ctx, line); err != nil {
					t.Fatalf("line %d: %v", i+1, err)
				}
				j := takeOne(t, s)
				done, err := s.Finish(ctx, j.Attempt(), Outcome{Status: 200, Result: []byte(strings.Repeat("x", 100))})
				if err != nil || done.State != Succeeded || len(done.Result) != 100 {
					t.Fatalf("line %d ended %+v, %v; want succeeded, its result returned", i+1, done, err)
				}
			}
			listed(t, s, "acme", Cancelled, own.ID)
			listed(t, s, "acme", Succeeded)
			if _, err := s.Get(ctx, own.ID); err != nil {
				t.Errorf("the tenant's own finished job: %v; want it kept", err)
			}
		})
	}
}
