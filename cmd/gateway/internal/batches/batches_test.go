package batches

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/test/redisserver"
)

// store is what both stores do.
type store interface {
	AddFile(ctx context.Context, f *File, bounded bool) error
	File(ctx context.Context, id string) (*File, error)
	Content(ctx context.Context, id string) ([]byte, error)
	Files(ctx context.Context, tenantID string) ([]*File, error)
	DeleteFile(ctx context.Context, id string) error
	AddBatch(ctx context.Context, b *Batch) error
	Batch(ctx context.Context, id string) (*Batch, error)
	Batches(ctx context.Context, tenantID string) ([]*Batch, error)
	UpdateBatch(ctx context.Context, id string, change func(*Batch) error) (*Batch, error)
	RecordLine(ctx context.Context, batchID string, l Line) (Counts, bool, error)
	Lines(ctx context.Context, batchID string) ([]Line, error)
	DropLines(ctx context.Context, batchID string) error
	OpenBatches(ctx context.Context) ([]*Batch, error)
	Reserve(ctx context.Context, key string, tokens, limit int64) (bool, error)
	Release(ctx context.Context, key string, tokens int64) error
}

// clock is a time the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// eachStore runs test on the memory store and on a Redis store, each with opts and a clock.
func eachStore(t *testing.T, opts Options, test func(t *testing.T, s store, c *clock)) {
	t.Run("memory", func(t *testing.T) {
		c := &clock{now: time.Unix(1_800_000_000, 0)}
		opts.Now = c.Now
		test(t, NewMemory(opts), c)
	})
	t.Run("redis", func(t *testing.T) {
		if testing.Short() {
			t.Skip("needs redis-server; skipped with -short")
		}
		c := &clock{now: time.Now()} // Redis expires keys on its own clock
		opts.Now = c.Now
		test(t, NewRedis(redisserver.Start(t).Client(t), opts), c)
	})
}

func TestATenantsFilesAreBoundedInCountAndBytes(t *testing.T) {
	eachStore(t, Options{MaxFilesPerTenant: 2, MaxBytesPerTenant: 10}, func(t *testing.T, s store, _ *clock) {
		ctx := context.Background()
		add := func(tenant, content string, bounded bool) (*File, error) {
			f := &File{ID: NewFileID(), TenantID: tenant, Purpose: PurposeBatch, Filename: "in.jsonl", Content: []byte(content)}
			return f, s.AddFile(ctx, f, bounded)
		}
		first, err := add("acme", "12345", true)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := add("acme", "123456", true); !errors.Is(err, ErrTooManyBytes) {
			t.Errorf("a file past the tenant's bytes: %v; want ErrTooManyBytes", err)
		}
		if _, err := add("acme", "1", true); err != nil {
			t.Fatal(err)
		}
		if _, err := add("acme", "1", true); !errors.Is(err, ErrTooManyFiles) {
			t.Errorf("a third file: %v; want ErrTooManyFiles", err)
		}
		if _, err := add("globex", "1", true); err != nil {
			t.Errorf("another tenant's file: %v; want it kept", err)
		}
		if _, err := add("acme", "a batch's output", false); err != nil {
			t.Errorf("an unbounded file: %v; want it kept whatever the bounds", err)
		}
		if got, _ := s.Content(ctx, first.ID); string(got) != "12345" {
			t.Errorf("content %q; want 12345", got)
		}
		if f, err := s.File(ctx, first.ID); err != nil || f.Bytes != 5 || f.TenantID != "acme" || f.Content != nil {
			t.Errorf("file %+v, %v; want acme's 5 bytes without its content", f, err)
		}
		if list, _ := s.Files(ctx, "acme"); len(list) != 3 {
			t.Errorf("acme has %d files; want 3", len(list))
		}
		if err := s.DeleteFile(ctx, first.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteFile(ctx, first.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("a file deleted twice: %v; want ErrNotFound", err)
		}
		if _, err := s.File(ctx, first.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("a deleted file: %v; want ErrNotFound", err)
		}
	})
}

func TestALineIsRecordedOnceAndNoneAfterItsBatchIsClosed(t *testing.T) {
	eachStore(t, Options{}, func(t *testing.T, s store, c *clock) {
		ctx := context.Background()
		b := &Batch{ID: NewBatchID(), TenantID: "acme", Status: InProgress, Total: 3, CreatedAt: c.Now()}
		if err := s.AddBatch(ctx, b); err != nil {
			t.Fatal(err)
		}
		record := func(n int, ok bool, data string) (Counts, bool) {
			t.Helper()
			counts, recorded, err := s.RecordLine(ctx, b.ID, Line{N: n, OK: ok, Data: []byte(data)})
			if err != nil {
				t.Fatal(err)
			}
			return counts, recorded
		}
		record(2, false, "two")
		if counts, recorded := record(2, true, "again"); recorded || counts != (Counts{Failed: 1}) {
			t.Errorf("a line recorded twice: %+v, recorded %v; want the first kept", counts, recorded)
		}
		record(1, true, "one")
		lines, _ := s.Lines(ctx, b.ID)
		if len(lines) != 2 || lines[0].N != 1 || !lines[0].OK || string(lines[1].Data) != "two" || lines[1].OK {
			t.Errorf("lines %+v; want line 1 ok, then line 2 failed", lines)
		}
		got, _ := s.UpdateBatch(ctx, b.ID, func(b *Batch) error { b.Status = Completed; return nil })
		if got.Status != Completed || got.Counts != (Counts{Completed: 1, Failed: 1}) {
			t.Errorf("updated %+v; want completed with its counts", got)
		}
		if err := s.DropLines(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
		if counts, recorded := record(3, true, "late"); recorded || counts.Done() != 2 {
			t.Errorf("a line after its batch was closed: %+v, recorded %v; want it left out", counts, recorded)
		}
		list, _ := s.Batches(ctx, "acme")
		if len(list) != 1 || list[0].ID != b.ID || list[0].Status != Completed {
			t.Errorf("acme's batches %+v; want the one, completed", list)
		}
		if other, _ := s.Batches(ctx, "globex"); len(other) != 0 {
			t.Errorf("globex sees %d batches; want none", len(other))
		}
	})
}

func TestABatchServicesEnqueuedTokensAreReservedWithinTheirLimit(t *testing.T) {
	eachStore(t, Options{}, func(t *testing.T, s store, _ *clock) {
		ctx := context.Background()
		reserve := func(tokens int64) bool {
			t.Helper()
			ok, err := s.Reserve(ctx, EnqueuedKey("openai", "gpt-4o"), tokens, 1000)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !reserve(600) || reserve(600) {
			t.Fatal("600 then 600 tokens of 1,000: want the first reserved and the second refused")
		}
		if ok, _ := s.Reserve(ctx, EnqueuedKey("openai", "gpt-4o-mini"), 600, 1000); !ok {
			t.Error("another model's tokens: want them reserved apart")
		}
		if err := s.Release(ctx, EnqueuedKey("openai", "gpt-4o"), 600); err != nil {
			t.Fatal(err)
		}
		if !reserve(1000) {
			t.Error("the whole limit once the first was released: want it reserved")
		}
	})
}

func TestOpenBatchesAreThoseNotEnded(t *testing.T) {
	eachStore(t, Options{}, func(t *testing.T, s store, c *clock) {
		ctx := context.Background()
		running := &Batch{ID: NewBatchID(), TenantID: "acme", Status: InProgress, CreatedAt: c.Now()}
		failed := &Batch{ID: NewBatchID(), TenantID: "acme", Status: Failed, CreatedAt: c.Now()}
		for _, b := range []*Batch{running, failed} {
			if err := s.AddBatch(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		open, err := s.OpenBatches(ctx)
		if err != nil || len(open) != 1 || open[0].ID != running.ID {
			t.Fatalf("open batches %v, %v; want the one in progress", open, err)
		}
		s.UpdateBatch(ctx, running.ID, func(b *Batch) error { b.Status = Completed; return nil })
		if open, _ := s.OpenBatches(ctx); len(open) != 0 {
			t.Errorf("open batches after it completed: %v; want none", open)
		}
	})
}
