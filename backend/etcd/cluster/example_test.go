package cluster_test

import (
	"context"
	"fmt"
	"time"

	toxiclient "github.com/Shopify/toxiproxy/v2/client"

	"github.com/locktest/locktest/backend/etcd/cluster"
)

// Start a cluster, write through one client's proxies, then cut that client
// off from every member.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c, err := cluster.Start(ctx, cluster.Config{LogDir: "logs"})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	cli, err := c.Client("c1")
	if err != nil {
		panic(err)
	}
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		panic(err)
	}

	links, err := c.Links("c1")
	if err != nil {
		panic(err)
	}
	for _, l := range links {
		if _, err := l.AddToxic("blackhole", "timeout", "downstream", 1,
			toxiclient.Attributes{"timeout": 0}); err != nil {
			panic(err)
		}
	}
	short, cancelShort := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancelShort()
	_, err = cli.Get(short, "k")
	fmt.Println(err != nil)
}
