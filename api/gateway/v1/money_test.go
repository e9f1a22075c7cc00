package v1_test

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

func TestMicroDollars(t *testing.T) {
	tests := []struct {
		money   gatewayv1.Money
		want    int64
		wantErr bool
	}{
		{money: "", want: 0},
		{money: "0", want: 0},
		{money: "0.00", want: 0},
		{money: "0.000001", want: 1},
		{money: "0.0024", want: 2400},
		{money: "0.50", want: 500_000},
		{money: "3.00", want: 3_000_000},
		{money: "5000", want: 5_000_000_000},
		{money: "007.5", want: 7_500_000},
		{money: "9223372036854.775807", want: math.MaxInt64},
		{money: "9223372036854.775808", wantErr: true},
		{money: "9223372036855", wantErr: true},
		{money: "99999999999999999999", wantErr: true},
		{money: "1e3", wantErr: true},
		{money: "-1", wantErr: true},
		{money: "+1", wantErr: true},
		{money: "0.0000001", wantErr: true},
		{money: "1.", wantErr: true},
		{money: ".5", wantErr: true},
		{money: " 1", wantErr: true},
		{money: "1,50", wantErr: true},
		{money: "$1", wantErr: true},
		{money: "0x10", wantErr: true},
		{money: "NaN", wantErr: true},
		{money: "Inf", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(string(tc.money), func(t *testing.T) {
			got, err := tc.money.MicroDollars()
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Fatalf("MicroDollars() error = %v, want error %t", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("MicroDollars() = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestMoneyFromMicro(t *testing.T) {
	tests := []struct {
		micros int64
		want   gatewayv1.Money
	}{
		{micros: 0, want: "0"},
		{micros: 1, want: "0.000001"},
		{micros: 2400, want: "0.0024"},
		{micros: 500_000, want: "0.5"},
		{micros: 3_000_000, want: "3"},
		{micros: 5_000_000_000, want: "5000"},
		{micros: 1_234_567_891, want: "1234.567891"},
		{micros: math.MaxInt64, want: "9223372036854.775807"},
		{micros: -5, want: "0"},
	}
	for _, tc := range tests {
		t.Run(string(tc.want), func(t *testing.T) {
			got := gatewayv1.MoneyFromMicro(tc.micros)
			if got != tc.want {
				t.Errorf("MoneyFromMicro(%d) = %q, want %q", tc.micros, got, tc.want)
			}
			if tc.micros < 0 {
				return
			}
			back, err := got.MicroDollars()
			if err != nil || back != tc.micros {
				t.Errorf("MoneyFromMicro(%d).MicroDollars() = %d, %v, want %d", tc.micros, back, err, tc.micros)
			}
		})
	}
}

func TestMoneyIsZero(t *testing.T) {
	var got []bool
	for _, m := range []gatewayv1.Money{"", "0", "0.000000", "0.000001", "1", "abc"} {
		got = append(got, m.IsZero())
	}
	want := []bool{true, true, true, false, false, false}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("IsZero() mismatch (-got +want):\n%s", diff)
	}
}
