// Command coredns is CoreDNS, built from a released version pinned in this
// module's go.mod, with the plugins of the upstream binary. `make bench`
// runs it beside shardns on the same cluster to compare the two.
// integration/scripts/build-coredns.sh builds it once into a cache folder.
// It is a separate module so that CoreDNS's dependencies stay out of
// shardns's own go.mod.
package main

import (
	"github.com/coredns/coredns/coremain"

	// The plugin list of the upstream coredns binary.
	_ "github.com/coredns/coredns/core/plugin"
)

func main() {
	coremain.Run()
}
