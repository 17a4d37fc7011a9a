// Package local embeds the demo configuration and cluster, so that
// `shardns serve` without --config serves them with no files around.
package local

import "embed"

// Files holds shardns.yaml and demo-cluster.yaml.
//
//go:embed shardns.yaml demo-cluster.yaml
var Files embed.FS

// ConfigFile is the name of the demo configuration inside Files.
const ConfigFile = "shardns.yaml"
