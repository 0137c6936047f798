from rsk.entry import main

main()
