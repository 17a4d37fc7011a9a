package kubeclient

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// The topology labels of a Node, current and deprecated; the deprecated
// ones are read when the current are missing, as older clusters set only
// those.
const (
	labelZone             = "topology.kubernetes.io/zone"
	labelRegion           = "topology.kubernetes.io/region"
	labelZoneDeprecated   = "failure-domain.beta.kubernetes.io/zone"
	labelRegionDeprecated = "failure-domain.beta.kubernetes.io/region"
)

// NodeLocality reads the zone and region labels of the Node named name.
// A Node without them is an error that says which labels are missing.
func (c *Client) NodeLocality(ctx context.Context, name string) (zone, region string, err error) {
	var node corev1.Node
	if err := c.core.Get().Resource("nodes").Name(name).Do(ctx).Into(&node); err != nil {
		return "", "", fmt.Errorf("kubernetes: node %q: %w", name, err)
	}
	zone, region = locality(node.Labels)
	if zone == "" || region == "" {
		return "", "", fmt.Errorf("kubernetes: node %q has no %s and %s labels (nor the deprecated %s and %s)",
			name, labelZone, labelRegion, labelZoneDeprecated, labelRegionDeprecated)
	}
	return zone, region, nil
}

// locality returns the zone and region in labels, preferring the current
// labels to the deprecated ones.
func locality(labels map[string]string) (zone, region string) {
	zone, region = labels[labelZone], labels[labelRegion]
	if zone == "" {
		zone = labels[labelZoneDeprecated]
	}
	if region == "" {
		region = labels[labelRegionDeprecated]
	}
	return zone, region
}

// NodeZone reads the zone label of the Node named name (the current one,
// else the deprecated one). A Node without it is an error that says so.
func (c *Client) NodeZone(ctx context.Context, name string) (string, error) {
	var node corev1.Node
	if err := c.core.Get().Resource("nodes").Name(name).Do(ctx).Into(&node); err != nil {
		return "", fmt.Errorf("kubernetes: node %q: %w", name, err)
	}
	zone, _ := locality(node.Labels)
	if zone == "" {
		return "", fmt.Errorf("kubernetes: node %q has no %s label (nor the deprecated %s)", name, labelZone, labelZoneDeprecated)
	}
	return zone, nil
}
