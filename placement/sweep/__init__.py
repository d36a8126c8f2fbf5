"""Purchase studies: many cluster designs x workloads, each planned; cost, time-to-train, frontier."""
