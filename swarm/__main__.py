from swarm.cli import main

raise SystemExit(main())
