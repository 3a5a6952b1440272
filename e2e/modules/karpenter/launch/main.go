// Command launch runs Karpenter's core with its kwok cloud provider, as sigs.k8s.io/karpenter/kwok does, with one
// addition for the tests: launches of an instance type can be made to fail with insufficient capacity, the error
// EC2 gives when it has no instance of the type in the zone (the AWS provider turns it into the same
// cloudprovider.InsufficientCapacityError). The file named by TRAINIUM_EKS_E2E_LAUNCH_FAILURES, read at each launch,
// maps an instance type to {"after": n, "count": m}: of the launches of that type, the ones after the first n fail,
// m of them; then launches succeed again. Without the file every launch succeeds.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kwok "sigs.k8s.io/karpenter/kwok/cloudprovider"
	v1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/cloudprovider"
	"sigs.k8s.io/karpenter/pkg/cloudprovider/overlay"
	"sigs.k8s.io/karpenter/pkg/controllers"
	"sigs.k8s.io/karpenter/pkg/controllers/state"
	"sigs.k8s.io/karpenter/pkg/operator"
)

// failures says which launches of an instance type fail.
type failures struct {
	After int `json:"after"`
	Count int `json:"count"`
}

// failingLaunches is a cloud provider whose launches fail as the failures file says.
type failingLaunches struct {
	cloudprovider.CloudProvider
	path     string
	mu       sync.Mutex
	launches map[string]int
}

func (f *failingLaunches) Create(ctx context.Context, nodeClaim *v1.NodeClaim) (*v1.NodeClaim, error) {
	if instanceType, fails := f.fails(nodeClaim); fails {
		log.FromContext(ctx).Info("launch failed by the test's failures file", "instance-type", instanceType)
		return nil, cloudprovider.NewInsufficientCapacityError(
			fmt.Errorf("no %s capacity in the requested zone (the test's failures file)", instanceType))
	}
	return f.CloudProvider.Create(ctx, nodeClaim)
}

// fails counts a launch of the NodeClaim's instance type and says whether it fails.
func (f *failingLaunches) fails(nodeClaim *v1.NodeClaim) (string, bool) {
	data, err := os.ReadFile(f.path)
	if err != nil {
		return "", false
	}
	byType := map[string]failures{}
	if err := json.Unmarshal(data, &byType); err != nil {
		return "", false
	}
	for _, requirement := range nodeClaim.Spec.Requirements {
		if requirement.Key != corev1.LabelInstanceTypeStable {
			continue
		}
		for _, instanceType := range requirement.Values {
			rule, found := byType[instanceType]
			if !found {
				continue
			}
			f.mu.Lock()
			f.launches[instanceType]++
			launch := f.launches[instanceType]
			f.mu.Unlock()
			return instanceType, launch > rule.After && launch <= rule.After+rule.Count
		}
	}
	return "", false
}

func main() {
	ctx, op := operator.NewOperator()
	instanceTypes, err := kwok.ConstructInstanceTypes(ctx)
	if err != nil {
		log.FromContext(ctx).Error(err, "failed constructing instance types")
	}
	provider := &failingLaunches{
		CloudProvider: kwok.NewCloudProvider(ctx, op.GetClient(), instanceTypes),
		path:          os.Getenv("TRAINIUM_EKS_E2E_LAUNCH_FAILURES"),
		launches:      map[string]int{},
	}
	cloudProvider := overlay.Decorate(provider, op.GetClient(), op.InstanceTypeStore)
	clusterState := state.NewCluster(op.Clock, op.GetClient(), cloudProvider)
	op.WithControllers(ctx, controllers.NewControllers(
		ctx,
		op.Manager,
		op.Clock,
		op.GetClient(),
		op.EventRecorder,
		cloudProvider,
		provider,
		clusterState,
		op.InstanceTypeStore,
	)...).Start(ctx)
}
