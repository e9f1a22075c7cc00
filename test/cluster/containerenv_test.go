package cluster

import "testing"

func TestExpandAsKubernetesDoes(t *testing.T) {
	env := []envVar{{"POD_NAME", "gw-0"}, {"EMPTY", ""}}
	for _, tc := range []struct{ in, want string }{
		{"--name=$(POD_NAME)", "--name=gw-0"},
		{"$(POD_NAME)-$(POD_NAME)", "gw-0-gw-0"},
		{"$(UNDEFINED)", "$(UNDEFINED)"},
		{"$$(POD_NAME)", "$(POD_NAME)"},
		{"$$$$", "$$"},
		{"a$b", "a$b"},
		{"$(POD_NAME", "$(POD_NAME"},
		{"$", "$"},
		{"x$(EMPTY)y", "xy"},
	} {
		if got := expand(tc.in, env); got != tc.want {
			t.Errorf("expand(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

func TestListenAddressesGetThePodsAddress(t *testing.T) {
	p := &runningPod{ip: "127.9.0.2"}
	for _, tc := range []struct{ in, want string }{
		{":8080", "127.9.0.2:8080"},
		{"--listen=:8080", "--listen=127.9.0.2:8080"},
		{"-listen=:8080", "-listen=127.9.0.2:8080"},
		{"--listen=0.0.0.0:8080", "--listen=0.0.0.0:8080"},
		{"--config=/etc/sluice/config.yaml", "--config=/etc/sluice/config.yaml"},
		{"--port=:x", "--port=:x"},
	} {
		if got := p.onPodAddress(tc.in); got != tc.want {
			t.Errorf("onPodAddress(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}
