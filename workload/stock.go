package workload

import (
	"strconv"

	"github.com/locktest/locktest/histories"
)

const stockName = histories.WorkloadStock

// DefaultItems is the stock workload's default inventory.
const DefaultItems = 100

// stock is the flash-sale workload: the value is the number of items sold
// from a stock of items per key; a holder reads it and, if any is left,
// writes it +1: a sale. Two holders at once sell the same item, and a late
// write can sell past the stock: oversold.
type stock struct{ items int64 }

func newStock(c Config) Section {
	items := c.Items
	if items <= 0 {
		items = DefaultItems
	}
	return stock{int64(items)}
}

func (s stock) Next(sold int64) (int64, bool) { return sold + 1, sold < s.items }
func (stock) Sells() bool                     { return true }
func (s stock) Params() map[string]string {
	return map[string]string{"items": strconv.FormatInt(s.items, 10)}
}
