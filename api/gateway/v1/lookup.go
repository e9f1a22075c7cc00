package v1

// Provider returns the provider named name, or nil if there is none.
func (c *Config) Provider(name string) *Provider {
	for i := range c.Providers {
		if c.Providers[i].Name == name {
			return &c.Providers[i]
		}
	}
	return nil
}

// ProvidersOfModel returns the providers that list model by its name, in
// the configuration's order: its pool.
//
// It scans the slices rather than a map built at load, so that a Config
// stays plain data that copies, mutation and cmp.Diff handle. A scan of a
// handful of models takes tens of nanoseconds, and about a microsecond for a
// hundred (BenchmarkProvidersOfModel).
func (c *Config) ProvidersOfModel(model string) []*Provider {
	return providersOfModel(c.Providers, model)
}

func providersOfModel(providers []Provider, model string) []*Provider {
	var out []*Provider
	for i := range providers {
		if providers[i].Model(model) != nil {
			out = append(out, &providers[i])
		}
	}
	return out
}

// Model returns the provider's model of this name, or nil.
func (p *Provider) Model(name string) *Model {
	for i := range p.Models {
		if p.Models[i].Name == name {
			return &p.Models[i]
		}
	}
	return nil
}
