package apispec

import "net/http"

// Example is a method's documented call. The body may name fixtures as $NAME (for example
// $NODE_ID, a node of the dev deployment); the reference's test creates them, runs every example
// with curl against `better-compute dev --sim 2` and checks the status.
type Example struct {
	// Body is the JSON request.
	Body string
	// Status is the HTTP status the call gets in dev; 0 means 200.
	Status int
	// Note says why, when Status is not 200.
	Note string
}

func (e Example) status() int {
	if e.Status == 0 {
		return http.StatusOK
	}
	return e.Status
}

// Examples holds every method's example, by route.
var Examples = map[string]Example{
	"/audit/list": {Body: `{"pageSize": 20}`},
	"/commands/cancel": {Body: `{"id": "$COMMAND_ID"}`, Status: 400,
		Note: "The simulated machine ran the command as soon as it was created, and a finished command cannot be cancelled (failed_precondition)."},
	"/commands/create": {Body: `{"nodeId": "$NODE_ID", "echo": {"data": {"hello": "world"}}, "timeout": "60s"}`},
	"/commands/get":    {Body: `{"id": "$COMMAND_ID"}`},
	"/commands/list":   {Body: `{"nodeId": "$NODE_ID", "pageSize": 20}`},
	"/eventStream/status": {Body: `{}`, Status: 404,
		Note: "dev does not enable the events module, so the method is not served (unimplemented)."},
	"/events/list":           {Body: `{"type": "node.joined", "pageSize": 20}`},
	"/iam/createApiKey":      {Body: `{"principalId": "$PRINCIPAL_ID", "name": "ci", "expireTime": "2030-01-01T00:00:00Z"}`},
	"/iam/createPrincipal":   {Body: `{"kind": "PRINCIPAL_KIND_SERVICE_ACCOUNT", "name": "deployer"}`},
	"/iam/createRoleBinding": {Body: `{"principalId": "$PRINCIPAL_ID", "role": "ROLE_VIEWER"}`},
	"/iam/createTenant":      {Body: `{"name": "research", "displayName": "Research"}`},
	"/iam/deleteApiKey":      {Body: `{"id": "$API_KEY_ID"}`},
	"/iam/deletePrincipal":   {Body: `{"id": "$PRINCIPAL_ID"}`},
	"/iam/deleteRoleBinding": {Body: `{"id": "$ROLE_BINDING_ID"}`},
	"/iam/deleteTenant":      {Body: `{"id": "$TENANT_ID"}`},
	"/iam/getPrincipal":      {Body: `{"id": "$PRINCIPAL_ID"}`},
	"/iam/getTenant":         {Body: `{"id": "$TENANT_ID"}`},
	"/iam/listApiKeys":       {Body: `{"pageSize": 20}`},
	"/iam/listPrincipals":    {Body: `{"pageSize": 20}`},
	"/iam/listRoleBindings":  {Body: `{"principalId": "$PRINCIPAL_ID"}`},
	"/iam/listTenants":       {Body: `{"pageSize": 20}`},
	"/iam/resumeTenant":      {Body: `{"id": "$TENANT_ID"}`},
	"/iam/suspendTenant":     {Body: `{"id": "$TENANT_ID"}`},
	"/iam/whoAmI":            {Body: `{}`},
	"/joinTokens/create":     {Body: `{"description": "rack 12", "maxUses": 10, "labels": {"rack": "12"}}`},
	"/joinTokens/list":       {Body: `{"pageSize": 20}`},
	"/joinTokens/revoke":     {Body: `{"id": "$JOIN_TOKEN_ID"}`},
	"/leases/create":         {Body: `{"poolId": "$POOL_ID", "gpus": 1, "duration": "3600s"}`},
	"/leases/extend":         {Body: `{"id": "$LEASE_ID", "by": "1800s"}`},
	"/leases/get":            {Body: `{"id": "$LEASE_ID"}`},
	"/leases/list":           {Body: `{"state": "LEASE_STATE_PLACED", "pageSize": 20}`},
	"/leases/release":        {Body: `{"id": "$LEASE_ID"}`},
	"/machineClasses/create": {Body: `{"name": "small", "provider": "sim", "params": {"bootDelay": "2s"}}`, Status: 404,
		Note: "dev enables the provision module only with --sim-provider-delay, so the method is not served here (unimplemented)."},
	"/machineClasses/delete": {Body: `{"name": "small"}`, Status: 404,
		Note: "dev enables the provision module only with --sim-provider-delay, so the method is not served here (unimplemented)."},
	"/machineClasses/get": {Body: `{"name": "small"}`, Status: 404,
		Note: "dev enables the provision module only with --sim-provider-delay, so the method is not served here (unimplemented)."},
	"/machineClasses/list": {Body: `{"pageSize": 20}`, Status: 404,
		Note: "dev enables the provision module only with --sim-provider-delay, so the method is not served here (unimplemented)."},
	"/machines/create": {Body: `{"class": "small", "name": "worker-1"}`, Status: 404,
		Note: "dev enables the provision module only with --sim-provider-delay, so the method is not served here (unimplemented)."},
	"/machines/delete": {Body: `{"id": "0192f7a0-0000-7000-8000-000000000001"}`, Status: 404,
		Note: "dev enables the provision module only with --sim-provider-delay, so the method is not served here (unimplemented)."},
	"/machines/get": {Body: `{"id": "0192f7a0-0000-7000-8000-000000000001"}`, Status: 404,
		Note: "dev enables the provision module only with --sim-provider-delay, so the method is not served here (unimplemented)."},
	"/machines/list": {Body: `{"class": "small", "pageSize": 20}`, Status: 404,
		Note: "dev enables the provision module only with --sim-provider-delay, so the method is not served here (unimplemented)."},
	"/machines/powerCycle": {Body: `{"id": "0192f7a0-0000-7000-8000-000000000001"}`, Status: 404,
		Note: "dev enables the provision module only with --sim-provider-delay, so the method is not served here (unimplemented)."},
	"/nodes/cordon":               {Body: `{"id": "$NODE_ID"}`},
	"/nodes/drain":                {Body: `{"id": "$NODE_ID"}`},
	"/nodes/get":                  {Body: `{"id": "$NODE_ID"}`},
	"/nodes/inventoryHistory":     {Body: `{"id": "$NODE_ID", "pageSize": 5}`},
	"/nodes/label":                {Body: `{"id": "$NODE_ID", "set": {"rack": "12"}}`},
	"/nodes/list":                 {Body: `{"online": true, "pageSize": 50}`},
	"/nodes/retire":               {Body: `{"id": "$DRAINED_NODE_ID"}`},
	"/nodes/revoke":               {Body: `{"id": "$SPARE_NODE_ID"}`},
	"/nodes/summary":              {Body: `{}`},
	"/nodes/uncordon":             {Body: `{"id": "$NODE_ID"}`},
	"/nodes/updateSpec":           {Body: `{"id": "$NODE_ID", "spec": {"tunnelPorts": [22]}}`},
	"/pools/create":               {Body: `{"name": "a100", "description": "A100 nodes", "nodeSelector": {"simulated": "true"}}`},
	"/pools/delete":               {Body: `{"id": "$POOL_ID"}`},
	"/pools/get":                  {Body: `{"id": "$POOL_ID"}`},
	"/pools/grant":                {Body: `{"poolId": "$POOL_ID", "tenantId": "$TENANT_ID", "nominal": {"gpus": {"NVIDIA A100-SXM4-80GB": 2}}, "weight": 1}`},
	"/pools/list":                 {Body: `{"pageSize": 20}`},
	"/pools/listGrants":           {Body: `{"poolId": "$POOL_ID"}`},
	"/pools/listPreemptions":      {Body: `{"poolId": "$POOL_ID"}`},
	"/pools/revokeGrant":          {Body: `{"poolId": "$POOL_ID", "tenantId": "$GRANTED_TENANT_ID"}`},
	"/pools/setQuota":             {Body: `{"poolId": "$POOL_ID", "quota": {"maxGpus": 8, "maxLeases": 4}}`},
	"/pools/update":               {Body: `{"id": "$POOL_ID", "description": "A100 nodes, rack 12", "updateMask": "description"}`},
	"/reservations/cancel":        {Body: `{"id": "$RESERVATION_ID"}`},
	"/reservations/create":        {Body: `{"poolId": "$POOL_ID", "startTime": "2030-01-01T08:00:00Z", "endTime": "2030-01-01T18:00:00Z", "description": "training run"}`},
	"/reservations/get":           {Body: `{"id": "$RESERVATION_ID"}`},
	"/reservations/list":          {Body: `{"poolId": "$POOL_ID"}`},
	"/secrets/create":             {Body: `{"name": "registry-token", "value": "c2VjcmV0"}`},
	"/secrets/delete":             {Body: `{"name": "$SECRET_NAME"}`},
	"/secrets/list":               {Body: `{"pageSize": 20}`},
	"/secrets/update":             {Body: `{"name": "$SECRET_NAME", "value": "bmV3LXNlY3JldA"}`},
	"/system/info":                {Body: `{}`},
	"/tunnels/close":              {Body: `{"id": "$TUNNEL_ID"}`},
	"/tunnels/create":             {Body: `{"nodeId": "$TUNNEL_NODE_ID", "port": 22}`},
	"/tunnels/list":               {Body: `{"includeClosed": true}`},
	"/usage/export":               {Body: `{"startTime": "2026-01-01T00:00:00Z", "endTime": "2026-02-01T00:00:00Z", "format": "EXPORT_FORMAT_CSV"}`},
	"/usage/query":                {Body: `{"startTime": "2026-01-01T00:00:00Z", "endTime": "2026-02-01T00:00:00Z", "hourly": false}`},
	"/webhooks/create":            {Body: `{"url": "https://hooks.example.com/better-compute", "eventTypes": ["node.joined", "lease.placed"]}`},
	"/webhooks/delete":            {Body: `{"id": "$WEBHOOK_ID"}`},
	"/webhooks/get":               {Body: `{"id": "$WEBHOOK_ID"}`},
	"/webhooks/list":              {Body: `{"pageSize": 20}`},
	"/webhooks/listDeadLetters":   {Body: `{"id": "$WEBHOOK_ID"}`},
	"/webhooks/replayDeadLetters": {Body: `{"id": "$WEBHOOK_ID"}`},
	"/webhooks/test":              {Body: `{"id": "$WEBHOOK_ID"}`},
	"/workflows/cancel":           {Body: `{"id": "$WORKFLOW_ID", "reason": "wrong version"}`},
	"/workflows/create":           {Body: `{"name": "upgrade bcd", "action": {"upgrade": {"version": "1.4.0"}}, "target": {"labelSelector": {"simulated": "true"}}, "policy": {"maxParallel": 1}, "paused": true}`},
	"/workflows/get":              {Body: `{"id": "$WORKFLOW_ID"}`},
	"/workflows/list":             {Body: `{"states": ["running", "paused"]}`},
	"/workflows/pause":            {Body: `{"id": "$WORKFLOW_ID", "reason": "investigating a failure"}`},
	"/workflows/resume":           {Body: `{"id": "$WORKFLOW_ID"}`},
}
