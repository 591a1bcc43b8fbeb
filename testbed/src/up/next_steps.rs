//! What `testbed up` tells the user once the fleet runs: its shape, its
//! clusters, and what to try.

use super::Fleet;

/// How many clusters `print_next_steps` lists by name.
const LISTED_CLUSTERS: usize = 20;

impl Fleet {
    /// Tells the user what runs and what to try.
    pub fn print_next_steps(&self) {
        let dir = self.dir.display();
        let bin = self.bin_dir.display();
        let hollow = if self.hollow.is_some() { "hollow " } else { "" };
        println!(
            "\nA fleet of {} relays and {} {hollow}edge agents with simulated clusters is running.",
            self.plan.relays.len() + 1,
            self.plan.agents.len()
        );
        println!("Clusters:");
        for agent in self.plan.agents.iter().take(LISTED_CLUSTERS) {
            println!(
                "  {:<14} under {:<10} {}",
                agent.name,
                agent.parent,
                agent.labels_flag()
            );
        }
        if self.plan.agents.len() > LISTED_CLUSTERS {
            println!("  … and {} more", self.plan.agents.len() - LISTED_CLUSTERS);
        }
        if let Some(etcd) = &self.etcd {
            println!(
                "The root's API keeps its objects on etcd: {} (data in {dir}/etcd).",
                etcd.endpoints().join(",")
            );
        }
        if self.replicas.len() > 1 {
            println!(
                "The root runs as {} replicas (one leads):",
                self.replicas.len()
            );
            for replica in &self.replicas {
                println!(
                    "  {:<8} API 127.0.0.1:{:<6} kubeconfig {}",
                    replica.name,
                    replica.api_port,
                    self.replica_kubeconfig(&replica.name).display()
                );
            }
        }
        if self.hollow.is_some() {
            println!(
                "\nTry:\n  kubectl --kubeconfig {dir}/root.kubeconfig apply -f examples/storefront/\n  \
                 {bin}/relayctl --kubeconfig {dir}/root.kubeconfig tree\n  \
                 {bin}/relayctl --kubeconfig {dir}/root.kubeconfig get placements -A\n\
                 Hollow clusters live in this process and have no kubeconfig. \
                 Logs are in {dir}/logs/. Press Ctrl-C to stop everything."
            );
            return;
        }
        let example = self
            .plan
            .agents
            .first()
            .map_or("NAME", |agent| agent.name.as_str());
        println!(
            "\nTry:\n  kubectl --kubeconfig {dir}/root.kubeconfig apply -f examples/storefront/\n  \
             {bin}/relayctl --kubeconfig {dir}/root.kubeconfig tree\n  \
             {bin}/relayctl --kubeconfig {dir}/root.kubeconfig get placements -A\n  \
             kubectl --kubeconfig {dir}/clusters/{example}.kubeconfig get deploy -n shop\n\
             Logs are in {dir}/logs/. Press Ctrl-C to stop everything."
        );
    }
}
