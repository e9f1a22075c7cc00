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

// ProviderForModel returns the provider that serves model, and the model, or
// nils if no provider does. Model names are unique across providers, so the
// answer is unique.
//
// It scans the slices rather than a map built at load, so that a Config
// stays plain data that copies, mutation and cmp.Diff handle. A scan of a
// handful of models takes tens of nanoseconds, and about a microsecond for a
// hundred (BenchmarkProviderForModel): small beside counting a prompt's
// tokens.
func (c *Config) ProviderForModel(model string) (*Provider, *Model) {
	return providerForModel(c.Providers, model)
}

func providerForModel(providers []Provider, model string) (*Provider, *Model) {
	for i := range providers {
		p := &providers[i]
		for j := range p.Models {
			if p.Models[j].Name == model {
				return p, &p.Models[j]
			}
		}
	}
	return nil, nil
}
