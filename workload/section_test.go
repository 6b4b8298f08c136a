package workload

import (
	"slices"
	"strings"
	"testing"

	"github.com/locktest/locktest/histories"
)

func TestSections(t *testing.T) {
	if got := Workloads(); !slices.Equal(got, []string{histories.WorkloadCounter, histories.WorkloadStock}) {
		t.Errorf("Workloads() = %v", got)
	}
	c, err := Config{}.section()
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := c.Next(41); !ok || v != 42 || c.Sells() {
		t.Errorf("counter: Next(41) = %d, %v; sells %v", v, ok, c.Sells())
	}
	s, err := Config{Workload: histories.WorkloadStock, Items: 3}.section()
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := s.Next(2); !ok || v != 3 {
		t.Errorf("stock of 3 with 2 sold: Next = %d, %v; want a sale", v, ok)
	}
	if _, ok := s.Next(3); ok {
		t.Error("stock of 3 with 3 sold: sold one more")
	}
	if s.Params()["items"] != "3" || !s.Sells() {
		t.Errorf("stock params %v", s.Params())
	}
	if d, _ := (Config{Workload: histories.WorkloadStock}).section(); d.Params()["items"] != "100" {
		t.Errorf("default stock %v", d.Params())
	}
	if _, err := (Config{Workload: "bank"}).section(); err == nil || !strings.Contains(err.Error(), "counter, stock") {
		t.Errorf("unknown workload: %v", err)
	}
}
