package batches

import (
	"context"
	"slices"
	"sync"
)

// Memory keeps files and batches in this process: they do not survive a restart. Its zero value
// is not usable; call NewMemory. It is safe for concurrent use.
type Memory struct {
	opts Options

	mu      sync.Mutex
	files   map[string]*File
	batches map[string]*Batch
	lines   map[string]map[int]Line // by batch id, by line number
	counts  map[string]Counts       // by batch id
	closed  map[string]bool         // the batches whose lines were dropped
	queued  map[string]int64        // tokens enqueued, by EnqueuedKey
}

// NewMemory returns an empty store.
func NewMemory(opts Options) *Memory {
	opts.defaults()
	return &Memory{opts: opts, files: map[string]*File{}, batches: map[string]*Batch{}, lines: map[string]map[int]Line{},
		counts: map[string]Counts{}, closed: map[string]bool{}, queued: map[string]int64{}}
}

// forgetExpired drops the files and batches whose time is past. The caller holds m.mu.
func (m *Memory) forgetExpired() {
	now := m.opts.Now()
	for id, f := range m.files {
		if now.After(f.ExpiresAt) {
			delete(m.files, id)
		}
	}
	for id, b := range m.batches {
		if now.After(b.CreatedAt.Add(m.opts.KeepFor)) {
			delete(m.batches, id)
			delete(m.lines, id)
			delete(m.counts, id)
			delete(m.closed, id)
		}
	}
}

// AddFile keeps f, unless bounded and its tenant keeps as many files or bytes as it may.
func (m *Memory) AddFile(_ context.Context, f *File, bounded bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgetExpired()
	n, bytes := 0, int64(0)
	for _, g := range m.files {
		if g.TenantID == f.TenantID {
			n, bytes = n+1, bytes+g.Bytes
		}
	}
	switch {
	case bounded && n >= m.opts.MaxFilesPerTenant:
		return ErrTooManyFiles
	case bounded && bytes+int64(len(f.Content)) > m.opts.MaxBytesPerTenant:
		return ErrTooManyBytes
	}
	f.Bytes, f.CreatedAt = int64(len(f.Content)), m.opts.Now()
	f.ExpiresAt = f.CreatedAt.Add(m.opts.KeepFor)
	c := *f
	c.Content = slices.Clone(f.Content)
	m.files[f.ID] = &c
	return nil
}

// File returns a file, without its content.
func (m *Memory) File(_ context.Context, id string) (*File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgetExpired()
	f, ok := m.files[id]
	if !ok {
		return nil, ErrNotFound
	}
	return withoutContent(f), nil
}

// withoutContent is a copy of f without its content.
func withoutContent(f *File) *File {
	c := *f
	c.Content = nil
	return &c
}

// Content returns a file's content.
func (m *Memory) Content(_ context.Context, id string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgetExpired()
	f, ok := m.files[id]
	if !ok {
		return nil, ErrNotFound
	}
	return slices.Clone(f.Content), nil
}

// Files returns a tenant's files, newest first, without their content.
func (m *Memory) Files(_ context.Context, tenantID string) ([]*File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgetExpired()
	var out []*File
	for _, f := range m.files {
		if f.TenantID == tenantID {
			out = append(out, withoutContent(f))
		}
	}
	slices.SortFunc(out, func(a, b *File) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, nil
}

// DeleteFile forgets a file.
func (m *Memory) DeleteFile(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.files[id]; !ok {
		return ErrNotFound
	}
	delete(m.files, id)
	return nil
}

// AddBatch keeps b.
func (m *Memory) AddBatch(_ context.Context, b *Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgetExpired()
	c := *b
	m.batches[b.ID] = &c
	return nil
}

// Batch returns a batch with its counts.
func (m *Memory) Batch(_ context.Context, id string) (*Batch, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgetExpired()
	b, ok := m.batches[id]
	if !ok {
		return nil, ErrNotFound
	}
	c := *b
	c.Counts = m.counts[id]
	return &c, nil
}

// Batches returns a tenant's batches, newest first.
func (m *Memory) Batches(_ context.Context, tenantID string) ([]*Batch, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forgetExpired()
	var out []*Batch
	for id, b := range m.batches {
		if b.TenantID == tenantID {
			c := *b
			c.Counts = m.counts[id]
			out = append(out, &c)
		}
	}
	slices.SortFunc(out, func(a, b *Batch) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, nil
}

// UpdateBatch changes a batch by change, which sees it with its counts; a change that returns an
// error is not kept.
func (m *Memory) UpdateBatch(_ context.Context, id string, change func(*Batch) error) (*Batch, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.batches[id]
	if !ok {
		return nil, ErrNotFound
	}
	c := *b
	c.Counts = m.counts[id]
	if err := change(&c); err != nil {
		return b, err
	}
	m.batches[id] = &c
	return &c, nil
}

// RecordLine records the outcome of a line of a batch, once: a line recorded already, or a line
// of a batch whose lines were dropped, is left as it was. It returns the batch's counts after it, and whether this recorded it.
func (m *Memory) RecordLine(_ context.Context, batchID string, l Line) (Counts, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch _, ok := m.batches[batchID]; {
	case !ok:
		return Counts{}, false, ErrNotFound
	case m.closed[batchID]: // its files are written: nothing more goes in
		return m.counts[batchID], false, nil
	}
	if m.lines[batchID] == nil {
		m.lines[batchID] = map[int]Line{}
	}
	if _, ok := m.lines[batchID][l.N]; ok {
		return m.counts[batchID], false, nil
	}
	l.Data = slices.Clone(l.Data)
	m.lines[batchID][l.N] = l
	c := m.counts[batchID]
	if l.OK {
		c.Completed++
	} else {
		c.Failed++
	}
	m.counts[batchID] = c
	return c, true, nil
}

// Lines returns the lines of a batch recorded so far, in the order of its input.
func (m *Memory) Lines(_ context.Context, batchID string) ([]Line, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Line, 0, len(m.lines[batchID]))
	for _, l := range m.lines[batchID] {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b Line) int { return a.N - b.N })
	return out, nil
}

// DropLines forgets the lines of a batch, once its files hold them, and records no more of it;
// its counts stay.
func (m *Memory) DropLines(_ context.Context, batchID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.lines, batchID)
	m.closed[batchID] = true
	return nil
}

// OpenBatches returns the batches that have not ended, with their counts.
func (m *Memory) OpenBatches(context.Context) ([]*Batch, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Batch
	for id, b := range m.batches {
		if !b.Status.Final() {
			c := *b
			c.Counts = m.counts[id]
			out = append(out, &c)
		}
	}
	return out, nil
}

// Reserve takes tokens of what a batch service holds enqueued under key, unless that would pass
// limit (zero: none). It reports whether it took them.
func (m *Memory) Reserve(_ context.Context, key string, tokens, limit int64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if limit > 0 && m.queued[key]+tokens > limit {
		return false, nil
	}
	m.queued[key] += tokens
	return true, nil
}

// Release gives back tokens Reserve took under key.
func (m *Memory) Release(_ context.Context, key string, tokens int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queued[key] = max(m.queued[key]-tokens, 0)
	return nil
}
