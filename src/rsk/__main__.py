from rsk.cli.app import main

main()
